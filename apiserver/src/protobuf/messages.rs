//! The messages this server reads from protobuf bodies: the objects `kubectl create <kind>`,
//! `kubectl run` and `kubectl auth can-i` send, with the fields those commands and Kubernetes'
//! typed clients fill in. Field numbers and JSON names are those of Kubernetes' `generated.proto`
//! files (`k8s.io/api`, `k8s.io/apimachinery`).

use super::wire::{Field, Kind, Message};

use Kind::{Bool, Bytes, Int32, Int64, IntOrString, Quantity, String as Str, Time};

const fn msg(message: &'static Message) -> Kind {
    Kind::Message(message)
}

/// The top-level kinds: API version, kind and message.
pub(crate) static KINDS: &[(&str, &str, &Message)] = &[
    ("v1", "Namespace", &NAMESPACE),
    ("v1", "ConfigMap", &CONFIG_MAP),
    ("v1", "Secret", &SECRET),
    ("v1", "ServiceAccount", &SERVICE_ACCOUNT),
    ("v1", "Service", &SERVICE),
    ("v1", "Pod", &POD),
    ("apps/v1", "Deployment", &DEPLOYMENT),
    ("policy/v1", "PodDisruptionBudget", &POD_DISRUPTION_BUDGET),
    ("policy/v1", "Eviction", &EVICTION),
    (
        "authorization.k8s.io/v1",
        "SelfSubjectAccessReview",
        &SELF_SUBJECT_ACCESS_REVIEW,
    ),
];

// meta/v1

static OBJECT_META: Message = Message {
    name: "ObjectMeta",
    fields: &[
        Field::one(1, "name", Str),
        Field::one(2, "generateName", Str),
        Field::one(3, "namespace", Str),
        Field::one(4, "selfLink", Str),
        Field::one(5, "uid", Str),
        Field::one(6, "resourceVersion", Str),
        Field::one(7, "generation", Int64),
        Field::one(8, "creationTimestamp", Time),
        Field::pointer(9, "deletionTimestamp", Time),
        Field::pointer(10, "deletionGracePeriodSeconds", Int64),
        Field::map(11, "labels", Str),
        Field::map(12, "annotations", Str),
        Field::list(13, "ownerReferences", msg(&OWNER_REFERENCE)),
        Field::list(14, "finalizers", Str),
    ],
};

static OWNER_REFERENCE: Message = Message {
    name: "OwnerReference",
    fields: &[
        Field::one(1, "kind", Str),
        Field::one(3, "name", Str),
        Field::one(4, "uid", Str),
        Field::one(5, "apiVersion", Str),
        Field::pointer(6, "controller", Bool),
        Field::pointer(7, "blockOwnerDeletion", Bool),
    ],
};

static LABEL_SELECTOR: Message = Message {
    name: "LabelSelector",
    fields: &[
        Field::map(1, "matchLabels", Str),
        Field::list(2, "matchExpressions", msg(&LABEL_SELECTOR_REQUIREMENT)),
    ],
};

static LABEL_SELECTOR_REQUIREMENT: Message = Message {
    name: "LabelSelectorRequirement",
    fields: &[
        Field::one(1, "key", Str),
        Field::one(2, "operator", Str),
        Field::list(3, "values", Str),
    ],
};

static CONDITION: Message = Message {
    name: "Condition",
    fields: &[
        Field::one(1, "type", Str),
        Field::one(2, "status", Str),
        Field::one(3, "observedGeneration", Int64),
        Field::one(4, "lastTransitionTime", Time),
        Field::one(5, "reason", Str),
        Field::one(6, "message", Str),
    ],
};

static DELETE_OPTIONS: Message = Message {
    name: "DeleteOptions",
    fields: &[
        Field::pointer(1, "gracePeriodSeconds", Int64),
        Field::pointer(2, "preconditions", msg(&PRECONDITIONS)),
        Field::pointer(3, "orphanDependents", Bool),
        Field::pointer(4, "propagationPolicy", Str),
        Field::list(5, "dryRun", Str),
    ],
};

static PRECONDITIONS: Message = Message {
    name: "Preconditions",
    fields: &[
        Field::pointer(1, "uid", Str),
        Field::pointer(2, "resourceVersion", Str),
    ],
};

// core/v1

static NAMESPACE: Message = Message {
    name: "Namespace",
    fields: &[
        Field::one(1, "metadata", msg(&OBJECT_META)),
        Field::one(2, "spec", msg(&NAMESPACE_SPEC)),
        Field::one(3, "status", msg(&NAMESPACE_STATUS)),
    ],
};

static NAMESPACE_SPEC: Message = Message {
    name: "NamespaceSpec",
    fields: &[Field::list(1, "finalizers", Str)],
};

static NAMESPACE_STATUS: Message = Message {
    name: "NamespaceStatus",
    fields: &[
        Field::one(1, "phase", Str),
        Field::list(2, "conditions", msg(&NAMESPACE_CONDITION)),
    ],
};

static NAMESPACE_CONDITION: Message = Message {
    name: "NamespaceCondition",
    fields: &[
        Field::one(1, "type", Str),
        Field::one(2, "status", Str),
        Field::one(4, "lastTransitionTime", Time),
        Field::one(5, "reason", Str),
        Field::one(6, "message", Str),
    ],
};

static CONFIG_MAP: Message = Message {
    name: "ConfigMap",
    fields: &[
        Field::one(1, "metadata", msg(&OBJECT_META)),
        Field::map(2, "data", Str),
        Field::map(3, "binaryData", Bytes),
        Field::pointer(4, "immutable", Bool),
    ],
};

static SECRET: Message = Message {
    name: "Secret",
    fields: &[
        Field::one(1, "metadata", msg(&OBJECT_META)),
        Field::map(2, "data", Bytes),
        Field::one(3, "type", Str),
        Field::map(4, "stringData", Str),
        Field::pointer(5, "immutable", Bool),
    ],
};

static SERVICE_ACCOUNT: Message = Message {
    name: "ServiceAccount",
    fields: &[
        Field::one(1, "metadata", msg(&OBJECT_META)),
        Field::list(2, "secrets", msg(&OBJECT_REFERENCE)),
        Field::list(3, "imagePullSecrets", msg(&LOCAL_OBJECT_REFERENCE)),
        Field::pointer(4, "automountServiceAccountToken", Bool),
    ],
};

static OBJECT_REFERENCE: Message = Message {
    name: "ObjectReference",
    fields: &[
        Field::one(1, "kind", Str),
        Field::one(2, "namespace", Str),
        Field::one(3, "name", Str),
        Field::one(4, "uid", Str),
        Field::one(5, "apiVersion", Str),
        Field::one(6, "resourceVersion", Str),
        Field::one(7, "fieldPath", Str),
    ],
};

static LOCAL_OBJECT_REFERENCE: Message = Message {
    name: "LocalObjectReference",
    fields: &[Field::one(1, "name", Str)],
};

static SERVICE: Message = Message {
    name: "Service",
    fields: &[
        Field::one(1, "metadata", msg(&OBJECT_META)),
        Field::one(2, "spec", msg(&SERVICE_SPEC)),
        Field::one(3, "status", msg(&SERVICE_STATUS)),
    ],
};

static SERVICE_SPEC: Message = Message {
    name: "ServiceSpec",
    fields: &[
        Field::list(1, "ports", msg(&SERVICE_PORT)),
        Field::map(2, "selector", Str),
        Field::one(3, "clusterIP", Str),
        Field::one(4, "type", Str),
        Field::list(5, "externalIPs", Str),
        Field::one(7, "sessionAffinity", Str),
        Field::one(8, "loadBalancerIP", Str),
        Field::list(9, "loadBalancerSourceRanges", Str),
        Field::one(10, "externalName", Str),
        Field::one(11, "externalTrafficPolicy", Str),
        Field::one(12, "healthCheckNodePort", Int32),
        Field::one(13, "publishNotReadyAddresses", Bool),
        Field::pointer(17, "ipFamilyPolicy", Str),
        Field::list(18, "clusterIPs", Str),
        Field::list(19, "ipFamilies", Str),
        Field::pointer(20, "allocateLoadBalancerNodePorts", Bool),
        Field::pointer(21, "loadBalancerClass", Str),
        Field::pointer(22, "internalTrafficPolicy", Str),
        Field::pointer(23, "trafficDistribution", Str),
    ],
};

static SERVICE_PORT: Message = Message {
    name: "ServicePort",
    fields: &[
        Field::one(1, "name", Str),
        Field::one(2, "protocol", Str),
        Field::one(3, "port", Int32),
        Field::one(4, "targetPort", IntOrString),
        Field::one(5, "nodePort", Int32),
        Field::pointer(6, "appProtocol", Str),
    ],
};

static SERVICE_STATUS: Message = Message {
    name: "ServiceStatus",
    fields: &[
        Field::one(1, "loadBalancer", msg(&LOAD_BALANCER_STATUS)),
        Field::list(2, "conditions", msg(&CONDITION)),
    ],
};

static LOAD_BALANCER_STATUS: Message = Message {
    name: "LoadBalancerStatus",
    fields: &[],
};

static POD: Message = Message {
    name: "Pod",
    fields: &[
        Field::one(1, "metadata", msg(&OBJECT_META)),
        Field::one(2, "spec", msg(&POD_SPEC)),
        Field::one(3, "status", msg(&POD_STATUS)),
    ],
};

static POD_TEMPLATE_SPEC: Message = Message {
    name: "PodTemplateSpec",
    fields: &[
        Field::one(1, "metadata", msg(&OBJECT_META)),
        Field::one(2, "spec", msg(&POD_SPEC)),
    ],
};

static POD_SPEC: Message = Message {
    name: "PodSpec",
    fields: &[
        Field::list(2, "containers", msg(&CONTAINER)),
        Field::one(3, "restartPolicy", Str),
        Field::pointer(4, "terminationGracePeriodSeconds", Int64),
        Field::pointer(5, "activeDeadlineSeconds", Int64),
        Field::one(6, "dnsPolicy", Str),
        Field::map(7, "nodeSelector", Str),
        Field::one(8, "serviceAccountName", Str),
        Field::one(9, "serviceAccount", Str),
        Field::one(10, "nodeName", Str),
        Field::one(11, "hostNetwork", Bool),
        Field::one(12, "hostPID", Bool),
        Field::one(13, "hostIPC", Bool),
        Field::list(15, "imagePullSecrets", msg(&LOCAL_OBJECT_REFERENCE)),
        Field::one(16, "hostname", Str),
        Field::one(17, "subdomain", Str),
        Field::one(19, "schedulerName", Str),
        Field::list(20, "initContainers", msg(&CONTAINER)),
        Field::pointer(21, "automountServiceAccountToken", Bool),
        Field::list(22, "tolerations", msg(&TOLERATION)),
        Field::one(24, "priorityClassName", Str),
        Field::pointer(25, "priority", Int32),
        Field::pointer(27, "shareProcessNamespace", Bool),
        Field::pointer(29, "runtimeClassName", Str),
        Field::pointer(30, "enableServiceLinks", Bool),
        Field::pointer(31, "preemptionPolicy", Str),
        Field::pointer(35, "setHostnameAsFQDN", Bool),
        Field::pointer(37, "hostUsers", Bool),
        Field::pointer(41, "hostnameOverride", Str),
    ],
};

static TOLERATION: Message = Message {
    name: "Toleration",
    fields: &[
        Field::one(1, "key", Str),
        Field::one(2, "operator", Str),
        Field::one(3, "value", Str),
        Field::one(4, "effect", Str),
        Field::pointer(5, "tolerationSeconds", Int64),
    ],
};

static CONTAINER: Message = Message {
    name: "Container",
    fields: &[
        Field::one(1, "name", Str),
        Field::one(2, "image", Str),
        Field::list(3, "command", Str),
        Field::list(4, "args", Str),
        Field::one(5, "workingDir", Str),
        Field::list(6, "ports", msg(&CONTAINER_PORT)),
        Field::list(7, "env", msg(&ENV_VAR)),
        Field::one(8, "resources", msg(&RESOURCE_REQUIREMENTS)),
        Field::one(13, "terminationMessagePath", Str),
        Field::one(14, "imagePullPolicy", Str),
        Field::one(16, "stdin", Bool),
        Field::one(17, "stdinOnce", Bool),
        Field::one(18, "tty", Bool),
        Field::one(20, "terminationMessagePolicy", Str),
        Field::pointer(24, "restartPolicy", Str),
    ],
};

static CONTAINER_PORT: Message = Message {
    name: "ContainerPort",
    fields: &[
        Field::one(1, "name", Str),
        Field::one(2, "hostPort", Int32),
        Field::one(3, "containerPort", Int32),
        Field::one(4, "protocol", Str),
        Field::one(5, "hostIP", Str),
    ],
};

static ENV_VAR: Message = Message {
    name: "EnvVar",
    fields: &[Field::one(1, "name", Str), Field::one(2, "value", Str)],
};

static RESOURCE_REQUIREMENTS: Message = Message {
    name: "ResourceRequirements",
    fields: &[
        Field::map(1, "limits", Quantity),
        Field::map(2, "requests", Quantity),
    ],
};

static POD_STATUS: Message = Message {
    name: "PodStatus",
    fields: &[
        Field::one(1, "phase", Str),
        Field::list(2, "conditions", msg(&POD_CONDITION)),
        Field::one(3, "message", Str),
        Field::one(4, "reason", Str),
        Field::one(5, "hostIP", Str),
        Field::one(6, "podIP", Str),
        Field::pointer(7, "startTime", Time),
        Field::one(9, "qosClass", Str),
        Field::one(11, "nominatedNodeName", Str),
        Field::one(14, "resize", Str),
        Field::one(17, "observedGeneration", Int64),
    ],
};

static POD_CONDITION: Message = Message {
    name: "PodCondition",
    fields: &[
        Field::one(1, "type", Str),
        Field::one(2, "status", Str),
        Field::one(3, "lastProbeTime", Time),
        Field::one(4, "lastTransitionTime", Time),
        Field::one(5, "reason", Str),
        Field::one(6, "message", Str),
        Field::one(7, "observedGeneration", Int64),
    ],
};

// apps/v1

static DEPLOYMENT: Message = Message {
    name: "Deployment",
    fields: &[
        Field::one(1, "metadata", msg(&OBJECT_META)),
        Field::one(2, "spec", msg(&DEPLOYMENT_SPEC)),
        Field::one(3, "status", msg(&DEPLOYMENT_STATUS)),
    ],
};

static DEPLOYMENT_SPEC: Message = Message {
    name: "DeploymentSpec",
    fields: &[
        Field::pointer(1, "replicas", Int32),
        Field::pointer(2, "selector", msg(&LABEL_SELECTOR)),
        Field::one(3, "template", msg(&POD_TEMPLATE_SPEC)),
        Field::one(4, "strategy", msg(&DEPLOYMENT_STRATEGY)),
        Field::one(5, "minReadySeconds", Int32),
        Field::pointer(6, "revisionHistoryLimit", Int32),
        Field::one(7, "paused", Bool),
        Field::pointer(9, "progressDeadlineSeconds", Int32),
    ],
};

static DEPLOYMENT_STRATEGY: Message = Message {
    name: "DeploymentStrategy",
    fields: &[
        Field::one(1, "type", Str),
        Field::pointer(2, "rollingUpdate", msg(&ROLLING_UPDATE_DEPLOYMENT)),
    ],
};

static ROLLING_UPDATE_DEPLOYMENT: Message = Message {
    name: "RollingUpdateDeployment",
    fields: &[
        Field::pointer(1, "maxUnavailable", IntOrString),
        Field::pointer(2, "maxSurge", IntOrString),
    ],
};

static DEPLOYMENT_STATUS: Message = Message {
    name: "DeploymentStatus",
    fields: &[
        Field::one(1, "observedGeneration", Int64),
        Field::one(2, "replicas", Int32),
        Field::one(3, "updatedReplicas", Int32),
        Field::one(4, "availableReplicas", Int32),
        Field::one(5, "unavailableReplicas", Int32),
        Field::one(7, "readyReplicas", Int32),
        Field::pointer(8, "collisionCount", Int32),
        Field::pointer(9, "terminatingReplicas", Int32),
    ],
};

// policy/v1

static POD_DISRUPTION_BUDGET: Message = Message {
    name: "PodDisruptionBudget",
    fields: &[
        Field::one(1, "metadata", msg(&OBJECT_META)),
        Field::one(2, "spec", msg(&POD_DISRUPTION_BUDGET_SPEC)),
        Field::one(3, "status", msg(&POD_DISRUPTION_BUDGET_STATUS)),
    ],
};

static POD_DISRUPTION_BUDGET_SPEC: Message = Message {
    name: "PodDisruptionBudgetSpec",
    fields: &[
        Field::pointer(1, "minAvailable", IntOrString),
        Field::pointer(2, "selector", msg(&LABEL_SELECTOR)),
        Field::pointer(3, "maxUnavailable", IntOrString),
        Field::pointer(4, "unhealthyPodEvictionPolicy", Str),
    ],
};

static POD_DISRUPTION_BUDGET_STATUS: Message = Message {
    name: "PodDisruptionBudgetStatus",
    fields: &[
        Field::one(1, "observedGeneration", Int64),
        Field::map(2, "disruptedPods", Time),
        Field::one(3, "disruptionsAllowed", Int32),
        Field::one(4, "currentHealthy", Int32),
        Field::one(5, "desiredHealthy", Int32),
        Field::one(6, "expectedPods", Int32),
        Field::list(7, "conditions", msg(&CONDITION)),
    ],
};

static EVICTION: Message = Message {
    name: "Eviction",
    fields: &[
        Field::one(1, "metadata", msg(&OBJECT_META)),
        Field::pointer(2, "deleteOptions", msg(&DELETE_OPTIONS)),
    ],
};

// authorization.k8s.io/v1

static SELF_SUBJECT_ACCESS_REVIEW: Message = Message {
    name: "SelfSubjectAccessReview",
    fields: &[
        Field::one(1, "metadata", msg(&OBJECT_META)),
        Field::one(2, "spec", msg(&SELF_SUBJECT_ACCESS_REVIEW_SPEC)),
        Field::one(3, "status", msg(&SUBJECT_ACCESS_REVIEW_STATUS)),
    ],
};

static SELF_SUBJECT_ACCESS_REVIEW_SPEC: Message = Message {
    name: "SelfSubjectAccessReviewSpec",
    fields: &[
        Field::pointer(1, "resourceAttributes", msg(&RESOURCE_ATTRIBUTES)),
        Field::pointer(2, "nonResourceAttributes", msg(&NON_RESOURCE_ATTRIBUTES)),
    ],
};

static RESOURCE_ATTRIBUTES: Message = Message {
    name: "ResourceAttributes",
    fields: &[
        Field::one(1, "namespace", Str),
        Field::one(2, "verb", Str),
        Field::one(3, "group", Str),
        Field::one(4, "version", Str),
        Field::one(5, "resource", Str),
        Field::one(6, "subresource", Str),
        Field::one(7, "name", Str),
    ],
};

static NON_RESOURCE_ATTRIBUTES: Message = Message {
    name: "NonResourceAttributes",
    fields: &[Field::one(1, "path", Str), Field::one(2, "verb", Str)],
};

static SUBJECT_ACCESS_REVIEW_STATUS: Message = Message {
    name: "SubjectAccessReviewStatus",
    fields: &[
        Field::one(1, "allowed", Bool),
        Field::one(2, "reason", Str),
        Field::one(3, "evaluationError", Str),
        Field::one(4, "denied", Bool),
    ],
};
