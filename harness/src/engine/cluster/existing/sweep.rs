//! What a run owns on an existing cluster, and how it is taken and given back:
//!
//! 1. **Hold**: the run's Lease `rackproof/rackproof-run` (holder: the run's id, 15 s, renewed
//!    every 5 s) says the cluster is in use. A run that finds it renewed by another waits up to
//!    two Lease durations for it to lapse, then refuses.
//! 2. **Sweep**: every other run with labelled objects left (namespaces, Nodes, CRDs,
//!    CertificateSigningRequests) is dead, since only one run holds the Lease at a time and its
//!    Lease lapsed: its objects are removed as at the end of a run, and the timeline says so.
//!    Objects carry `app.kubernetes.io/managed-by=rackproof` and `rackproof.dev/run=ID`; Nodes
//!    the run label alone (NodeRestriction keeps a node from setting `kubernetes.io` labels).
//! 3. **Clash check**: a name the run will create (namespaces `rackproof` and `apps`, its Nodes,
//!    the image catalog) taken by an object it does not own, or a CRD with another definition,
//!    refuses the run before it creates anything. A CRD with the same definition is used as it is
//!    and left in place.
//! 4. **Removal**: everything labelled `rackproof.dev/run=ID`, the node Leases its Nodes own and
//!    the Events in `default` about its Nodes are deleted; the run waits until they are gone (two
//!    minutes at most: a namespace's contents are deleted by the cluster's namespace controller),
//!    deleting at once the pods no kubelet will confirm (its namespaces', and any on its Nodes).
//!    NotFound is success, so a removal interrupted midway is finished by the next sweep.

use std::collections::BTreeSet;
use std::time::Duration;

use inplace_api::crd::ImageCatalog;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Event, Namespace, Node, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, CustomResourceExt, Resource, ResourceExt};
use rackproof_clock::Clock;
use serde::de::DeserializeOwned;

use super::{ExistingError, Ownership, RUN_LABEL};
use crate::engine::cluster::objects::{CATALOG, NAMESPACE};
use crate::engine::cluster::setup::WORKLOAD_NAMESPACE;

/// The run's Lease, in [`NAMESPACE`].
pub(crate) const LEASE: &str = "rackproof-run";
/// How long the run's Lease lasts unrenewed.
const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How often it is renewed.
const RENEW: Duration = Duration::from_secs(5);
/// How long removal waits for the deleted objects to be gone.
const GONE_WITHIN: Duration = Duration::from_secs(120);
/// The namespaces a run makes.
const NAMESPACES: [&str; 2] = [NAMESPACE, WORKLOAD_NAMESPACE];
/// Where node Leases live.
const NODE_LEASES: &str = "kube-node-lease";

fn request(what: impl Into<String>) -> impl FnOnce(kube::Error) -> ExistingError {
    let what = what.into();
    move |source| ExistingError::Request { what, source }
}

fn lease_live(lease: &Lease, now: jiff::Timestamp) -> bool {
    let Some(spec) = &lease.spec else {
        return false;
    };
    let (Some(renewed), Some(seconds)) = (&spec.renew_time, spec.lease_duration_seconds) else {
        return false;
    };
    let expiry = renewed.0 + jiff::SignedDuration::from_secs(i64::from(seconds));
    expiry > now
}

/// Waits for another run's live Lease to lapse, then removes what every dead run left. Returns
/// what it swept, one sentence per run.
pub(super) async fn sweep(
    client: &Client,
    clock: &Clock,
    owner: &Ownership,
) -> Result<Vec<String>, ExistingError> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let started = clock.instant();
    loop {
        let lease = leases
            .get_opt(LEASE)
            .await
            .map_err(request(format!("read Lease {NAMESPACE}/{LEASE}")))?;
        let holder = lease
            .as_ref()
            .filter(|l| lease_live(l, clock.now()))
            .and_then(|l| l.spec.as_ref()?.holder_identity.clone())
            .filter(|h| *h != owner.run);
        let Some(holder) = holder else { break };
        if clock.since(started) > 2 * LEASE_DURATION {
            return Err(ExistingError::Held { run: holder });
        }
        clock.sleep(Duration::from_secs(1)).await;
    }
    let mut notes = Vec::new();
    for run in labelled_runs(client).await? {
        if run == owner.run {
            continue;
        }
        let removed = remove(client, clock, &Ownership::new(run.clone())).await?;
        notes.push(format!(
            "swept what run {run} left (its Lease lapsed: it was killed): {}",
            if removed.is_empty() {
                "nothing".to_owned()
            } else {
                removed.join(", ")
            }
        ));
    }
    Ok(notes)
}

/// The runs that have labelled objects on the cluster.
async fn labelled_runs(client: &Client) -> Result<BTreeSet<String>, ExistingError> {
    // Nodes carry the run label alone (NodeRestriction), so the run label is what is looked for.
    let params = ListParams::default().labels(RUN_LABEL);
    let mut runs = BTreeSet::new();
    let mut collect = |labels: &std::collections::BTreeMap<String, String>| {
        if let Some(run) = labels.get(RUN_LABEL) {
            runs.insert(run.clone());
        }
    };
    for o in list::<Namespace>(client, &params, "namespaces").await? {
        collect(o.labels());
    }
    for o in list::<Node>(client, &params, "Nodes").await? {
        collect(o.labels());
    }
    for o in list::<CustomResourceDefinition>(client, &params, "CRDs").await? {
        collect(o.labels());
    }
    for o in list::<CertificateSigningRequest>(client, &params, "CSRs").await? {
        collect(o.labels());
    }
    Ok(runs)
}

async fn list<K>(client: &Client, params: &ListParams, what: &str) -> Result<Vec<K>, ExistingError>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    Api::<K>::all(client.clone())
        .list(params)
        .await
        .map(|l| l.items)
        .map_err(request(format!("list the {what} labelled by Rackproof")))
}

/// Refuses names the run would create that are taken by objects it does not own; a CRD with the
/// same definition is used. Returns what it uses, one sentence each.
pub(super) async fn check_clashes(
    client: &Client,
    nodes: &[String],
) -> Result<Vec<String>, ExistingError> {
    let mut clashes = Vec::new();
    let mut notes = Vec::new();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in NAMESPACES {
        if let Some(ns) = namespaces
            .get_opt(name)
            .await
            .map_err(request(format!("read namespace {name}")))?
        {
            clashes.push(format!(
                "namespace {name} exists and {}: delete it (kubectl delete namespace {name}), or run against another cluster",
                ownership(&ns)
            ));
        }
    }
    let node_api: Api<Node> = Api::all(client.clone());
    for name in nodes {
        if let Some(node) = node_api
            .get_opt(name)
            .await
            .map_err(request(format!("read Node {name}")))?
        {
            clashes.push(format!(
                "Node {name} exists and {}: delete it (kubectl delete node {name}), or give the scenario's nodes other names (lab.names)",
                ownership(&node)
            ));
        }
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut has_catalogs = false;
    for crd in inplace_api::crd::crds() {
        let name = crd.name_any();
        if let Some(theirs) = crds
            .get_opt(&name)
            .await
            .map_err(request(format!("read CRD {name}")))?
        {
            if same_definition(&crd, &theirs) {
                has_catalogs |= name == ImageCatalog::crd_name();
                if !theirs.labels().contains_key(RUN_LABEL) {
                    notes.push(format!(
                        "uses the cluster's CRD {name} (the same definition; it stays)"
                    ));
                }
            } else {
                clashes.push(format!(
                    "CRD {name} exists with another definition (not made by Rackproof, or by another version of it): delete it (kubectl delete crd {name}) if nothing else uses it, or run against another cluster"
                ));
            }
        }
    }
    if has_catalogs
        && let Some(catalog) = Api::<ImageCatalog>::all(client.clone())
            .get_opt(CATALOG)
            .await
            .map_err(request(format!("read ImageCatalog {CATALOG}")))?
    {
        clashes.push(format!(
            "ImageCatalog {CATALOG} exists and {}: delete it (kubectl delete imagecatalog {CATALOG})",
            ownership(&catalog)
        ));
    }
    if clashes.is_empty() {
        Ok(notes)
    } else {
        Err(ExistingError::Clash { clashes })
    }
}

/// Why an object in the way is not the run's to take.
fn ownership<K: Resource>(object: &K) -> String {
    match object.meta().labels.as_ref().and_then(|l| l.get(RUN_LABEL)) {
        Some(run) => format!("belongs to Rackproof run {run}, still being removed"),
        None => "was not made by Rackproof".to_owned(),
    }
}

/// Whether two CRDs define the same resource: group, names, scope and each version's name,
/// serving, storage and schema.
fn same_definition(ours: &CustomResourceDefinition, theirs: &CustomResourceDefinition) -> bool {
    let key = |crd: &CustomResourceDefinition| {
        let versions: Vec<_> = crd
            .spec
            .versions
            .iter()
            .map(|v| {
                (
                    v.name.clone(),
                    v.served,
                    v.storage,
                    serde_json::to_value(&v.schema).unwrap_or_default(),
                )
            })
            .collect();
        (
            crd.spec.group.clone(),
            crd.spec.names.plural.clone(),
            crd.spec.names.kind.clone(),
            crd.spec.scope.clone(),
            versions,
        )
    };
    key(ours) == key(theirs)
}

/// Creates the run's namespaces and its Lease.
pub(super) async fn hold(
    client: &Client,
    clock: &Clock,
    owner: &Ownership,
) -> Result<(), ExistingError> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in NAMESPACES {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                labels: Some(owner.labels()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .map_err(request(format!("create namespace {name}")))?;
    }
    let lease = Lease {
        metadata: ObjectMeta {
            name: Some(LEASE.to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            labels: Some(owner.labels()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(owner.run.clone()),
            lease_duration_seconds: Some(
                i32::try_from(LEASE_DURATION.as_secs()).unwrap_or(i32::MAX),
            ),
            renew_time: Some(MicroTime(clock.now())),
            acquire_time: Some(MicroTime(clock.now())),
            ..LeaseSpec::default()
        }),
    };
    Api::<Lease>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &lease)
        .await
        .map_err(request(format!("create Lease {NAMESPACE}/{LEASE}")))?;
    Ok(())
}

/// Renews the run's Lease every [`RENEW`] until aborted.
pub(super) async fn renew(client: Client, clock: Clock, owner: Ownership) {
    let leases: Api<Lease> = Api::namespaced(client, NAMESPACE);
    loop {
        clock.sleep(RENEW).await;
        let renewed = async {
            let mut lease = leases.get(LEASE).await?;
            if let Some(spec) = lease.spec.as_mut() {
                spec.renew_time = Some(MicroTime(clock.now()));
            }
            leases.replace(LEASE, &PostParams::default(), &lease).await
        };
        if let Err(e) = renewed.await {
            tracing::warn!(error = %rackproof_std::error_chain(&e), run = %owner.run, "renewing the run's Lease failed");
        }
    }
}

/// Deletes `name`; NotFound is success.
async fn delete<K>(api: &Api<K>, name: &str, what: &str) -> Result<bool, ExistingError>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(source) => Err(ExistingError::Request {
            what: format!("delete {what} {name}"),
            source,
        }),
    }
}

/// Removes everything `owner`'s run made (module docs, step 4). Returns what it deleted.
pub(crate) async fn remove(
    client: &Client,
    clock: &Clock,
    owner: &Ownership,
) -> Result<Vec<String>, ExistingError> {
    let params = ListParams::default().labels(&owner.selector());
    let mut removed = Vec::new();
    let nodes: Api<Node> = Api::all(client.clone());
    let mine = list::<Node>(client, &params, "Nodes").await?;
    let uids: BTreeSet<String> = mine.iter().filter_map(|n| n.uid()).collect();
    let names: BTreeSet<String> = mine.iter().map(ResourceExt::name_any).collect();
    for name in &names {
        delete(&nodes, name, "Node").await?;
        removed.push(format!("Node {name}"));
    }
    let node_leases: Api<Lease> = Api::namespaced(client.clone(), NODE_LEASES);
    let leases = node_leases
        .list(&ListParams::default())
        .await
        .map_err(request(format!("list the Leases in {NODE_LEASES}")))?;
    for lease in leases {
        let owned = lease
            .owner_references()
            .iter()
            .any(|o| o.kind == "Node" && uids.contains(&o.uid));
        if owned {
            delete(&node_leases, &lease.name_any(), "node Lease").await?;
        }
    }
    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
    for csr in list::<CertificateSigningRequest>(client, &params, "CSRs").await? {
        delete(&csrs, &csr.name_any(), "CertificateSigningRequest").await?;
    }
    let catalogs: Api<ImageCatalog> = Api::all(client.clone());
    if let Ok(list) = catalogs.list(&params).await {
        for catalog in list {
            delete(&catalogs, &catalog.name_any(), "ImageCatalog").await?;
            removed.push(format!("ImageCatalog {}", catalog.name_any()));
        }
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for ns in list::<Namespace>(client, &params, "namespaces").await? {
        delete(&namespaces, &ns.name_any(), "namespace").await?;
        removed.push(format!("namespace {}", ns.name_any()));
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in list::<CustomResourceDefinition>(client, &params, "CRDs").await? {
        delete(&crds, &crd.name_any(), "CRD").await?;
        removed.push(format!("CRD {}", crd.name_any()));
    }
    delete_node_events(client, &names).await?;
    let started = clock.instant();
    loop {
        force_delete_pods(client, &params, &names).await?;
        let left = list::<Namespace>(client, &params, "namespaces")
            .await?
            .len()
            + list::<Node>(client, &params, "Nodes").await?.len()
            + list::<CustomResourceDefinition>(client, &params, "CRDs")
                .await?
                .len();
        if left == 0 || clock.since(started) > GONE_WITHIN {
            break;
        }
        clock.sleep(Duration::from_millis(500)).await;
    }
    // The controller manager records the Nodes' removal after they are gone.
    clock.sleep(Duration::from_secs(2)).await;
    delete_node_events(client, &names).await?;
    Ok(removed)
}

/// Deletes at once the pods of the run's namespaces and the pods bound to its Nodes `names`
/// anywhere: no kubelet confirms their deletion once the run's nodes are gone, so they would
/// stay Terminating (and their namespace with them) until the cluster's pod garbage collector,
/// if it runs, removed them.
async fn force_delete_pods(
    client: &Client,
    params: &ListParams,
    names: &BTreeSet<String>,
) -> Result<(), ExistingError> {
    let mut pods = Vec::new();
    for ns in list::<Namespace>(client, params, "namespaces").await? {
        let api: Api<Pod> = Api::namespaced(client.clone(), &ns.name_any());
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(request(format!("list the pods in {}", ns.name_any())))?;
        pods.extend(list.items);
    }
    let all: Api<Pod> = Api::all(client.clone());
    for name in names {
        let on_node = ListParams::default().fields(&format!("spec.nodeName={name}"));
        let list = all
            .list(&on_node)
            .await
            .map_err(request(format!("list the pods on Node {name}")))?;
        pods.extend(list.items);
    }
    let now = DeleteParams::default().grace_period(0);
    for pod in pods {
        let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
        match api.delete(&pod.name_any(), &now).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(source) => {
                return Err(ExistingError::Request {
                    what: format!(
                        "delete pod {}/{}",
                        pod.namespace().unwrap_or_default(),
                        pod.name_any()
                    ),
                    source,
                });
            }
        }
    }
    Ok(())
}

/// Deletes the Events in `default` about the Nodes `names`.
async fn delete_node_events(
    client: &Client,
    names: &BTreeSet<String>,
) -> Result<(), ExistingError> {
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    for name in names {
        let about = ListParams::default().fields(&format!(
            "involvedObject.kind=Node,involvedObject.name={name}"
        ));
        let list = events
            .list(&about)
            .await
            .map_err(request(format!("list the Events about Node {name}")))?;
        for event in list {
            delete(&events, &event.name_any(), "Event").await?;
        }
    }
    Ok(())
}

/// Removes what run `owner` made, through kubeconfig `path`: the end of a run that was
/// interrupted (its tasks are gone, so nothing makes more objects meanwhile).
pub(crate) async fn remove_through(
    path: &std::path::Path,
    owner: &Ownership,
) -> Result<Vec<String>, ExistingError> {
    let (client, _) = super::connect(path).await?;
    remove(&client, &Clock::wall(), owner).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_live_until_its_renewal_plus_its_duration() {
        let renewed: jiff::Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let lease = Lease {
            spec: Some(LeaseSpec {
                renew_time: Some(MicroTime(renewed)),
                lease_duration_seconds: Some(15),
                ..LeaseSpec::default()
            }),
            ..Lease::default()
        };
        let at = |s: i64| renewed + jiff::SignedDuration::from_secs(s);
        assert!(lease_live(&lease, at(14)));
        assert!(!lease_live(&lease, at(15)));
        assert!(!lease_live(&Lease::default(), at(0)));
    }

    #[test]
    fn the_same_crd_is_the_same_definition_and_a_changed_one_is_not() {
        let crds = inplace_api::crd::crds();
        assert!(same_definition(&crds[0], &crds[0].clone()));
        let mut changed = crds[0].clone();
        changed.spec.versions[0].served = !changed.spec.versions[0].served;
        assert!(!same_definition(&crds[0], &changed));
    }
}
