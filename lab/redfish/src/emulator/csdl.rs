//! The Redfish types the emulator serves, and the two OData documents derived from them: the
//! CSDL `$metadata` document and the `/redfish/v1/odata` service document.
//!
//! Every `@odata.type` in a response comes from [`RedfishType`], so `$metadata` references
//! exactly the namespaces the service uses.

use serde_json::{Value, json};

/// A Redfish resource type: the schema's namespace, the version this service implements, and the
/// entity type name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RedfishType {
    pub(crate) namespace: &'static str,
    /// `None` for unversioned collection schemas.
    pub(crate) version: Option<&'static str>,
    pub(crate) entity: &'static str,
}

impl RedfishType {
    const fn versioned(namespace: &'static str, version: &'static str) -> Self {
        Self {
            namespace,
            version: Some(version),
            entity: namespace,
        }
    }

    const fn collection(namespace: &'static str) -> Self {
        Self {
            namespace,
            version: None,
            entity: namespace,
        }
    }

    /// The `@odata.type` value, e.g. `#ComputerSystem.v1_20_0.ComputerSystem`.
    pub(crate) fn odata_type(&self) -> String {
        match self.version {
            Some(version) => format!("#{}.{version}.{}", self.namespace, self.entity),
            None => format!("#{}.{}", self.namespace, self.entity),
        }
    }

    /// The `@odata.context` value, e.g. `/redfish/v1/$metadata#ComputerSystem.ComputerSystem`.
    pub(crate) fn odata_context(&self) -> String {
        format!("/redfish/v1/$metadata#{}.{}", self.namespace, self.entity)
    }

    /// The DMTF schema file that defines the namespace.
    fn schema_uri(&self) -> String {
        format!(
            "http://redfish.dmtf.org/schemas/v1/{}_v1.xml",
            self.namespace
        )
    }
}

pub(crate) const SERVICE_ROOT: RedfishType = RedfishType::versioned("ServiceRoot", "v1_11_0");
pub(crate) const SYSTEM: RedfishType = RedfishType::versioned("ComputerSystem", "v1_20_0");
pub(crate) const SYSTEMS: RedfishType = RedfishType::collection("ComputerSystemCollection");
pub(crate) const CHASSIS: RedfishType = RedfishType::versioned("Chassis", "v1_23_0");
pub(crate) const CHASSIS_COLLECTION: RedfishType = RedfishType::collection("ChassisCollection");
pub(crate) const MANAGER: RedfishType = RedfishType::versioned("Manager", "v1_17_0");
pub(crate) const MANAGERS: RedfishType = RedfishType::collection("ManagerCollection");
pub(crate) const SESSION_SERVICE: RedfishType = RedfishType::versioned("SessionService", "v1_1_8");
pub(crate) const SESSION: RedfishType = RedfishType::versioned("Session", "v1_6_0");
pub(crate) const SESSIONS: RedfishType = RedfishType::collection("SessionCollection");
pub(crate) const ACCOUNT_SERVICE: RedfishType = RedfishType::versioned("AccountService", "v1_13_0");
pub(crate) const ACCOUNT: RedfishType = RedfishType::versioned("ManagerAccount", "v1_10_0");
pub(crate) const ACCOUNTS: RedfishType = RedfishType::collection("ManagerAccountCollection");
pub(crate) const TASK_SERVICE: RedfishType = RedfishType::versioned("TaskService", "v1_2_0");
pub(crate) const TASK: RedfishType = RedfishType::versioned("Task", "v1_7_0");
pub(crate) const TASKS: RedfishType = RedfishType::collection("TaskCollection");
/// The type of the objects in `@Message.ExtendedInfo`.
pub(crate) const MESSAGE: RedfishType = RedfishType::versioned("Message", "v1_1_2");

/// Every type the emulator emits, in the order `$metadata` lists them.
pub(crate) const ALL_TYPES: [RedfishType; 17] = [
    SERVICE_ROOT,
    SYSTEMS,
    SYSTEM,
    CHASSIS_COLLECTION,
    CHASSIS,
    MANAGERS,
    MANAGER,
    SESSION_SERVICE,
    SESSIONS,
    SESSION,
    ACCOUNT_SERVICE,
    ACCOUNTS,
    ACCOUNT,
    TASK_SERVICE,
    TASKS,
    TASK,
    MESSAGE,
];

/// The CSDL `$metadata` document: one `edmx:Reference` per schema, including the unversioned
/// namespace and the implemented version, and the service's entity container.
pub(crate) fn metadata_document() -> String {
    let mut xml = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <edmx:Edmx xmlns:edmx=\"http://docs.oasis-open.org/odata/ns/edmx\" Version=\"4.0\">\n",
    );
    xml.push_str(
        "  <edmx:Reference Uri=\"http://redfish.dmtf.org/schemas/v1/RedfishExtensions_v1.xml\">\n    \
         <edmx:Include Namespace=\"RedfishExtensions.v1_0_0\" Alias=\"Redfish\"/>\n  </edmx:Reference>\n  \
         <edmx:Reference Uri=\"http://redfish.dmtf.org/schemas/v1/Resource_v1.xml\">\n    \
         <edmx:Include Namespace=\"Resource\"/>\n    <edmx:Include Namespace=\"Resource.v1_0_0\"/>\n  </edmx:Reference>\n",
    );
    for ty in ALL_TYPES {
        xml.push_str(&format!("  <edmx:Reference Uri=\"{}\">\n", ty.schema_uri()));
        xml.push_str(&format!(
            "    <edmx:Include Namespace=\"{}\"/>\n",
            ty.namespace
        ));
        if let Some(version) = ty.version {
            xml.push_str(&format!(
                "    <edmx:Include Namespace=\"{}.{version}\"/>\n",
                ty.namespace
            ));
        }
        xml.push_str("  </edmx:Reference>\n");
    }
    xml.push_str(&format!(
        "  <edmx:DataServices>\n    <Schema xmlns=\"http://docs.oasis-open.org/odata/ns/edm\" Namespace=\"Service\">\n      \
         <EntityContainer Name=\"Service\" Extends=\"ServiceRoot.{}.ServiceContainer\"/>\n    </Schema>\n  </edmx:DataServices>\n</edmx:Edmx>\n",
        SERVICE_ROOT.version.unwrap_or("v1_0_0")
    ));
    xml
}

/// The OData service document at `/redfish/v1/odata`: the service root's top-level resources.
pub(crate) fn service_document() -> Value {
    let singletons = [
        ("Service", "/redfish/v1/"),
        ("Systems", "/redfish/v1/Systems"),
        ("Chassis", "/redfish/v1/Chassis"),
        ("Managers", "/redfish/v1/Managers"),
        ("SessionService", "/redfish/v1/SessionService"),
        ("AccountService", "/redfish/v1/AccountService"),
        ("TaskService", "/redfish/v1/TaskService"),
        ("Sessions", "/redfish/v1/SessionService/Sessions"),
    ];
    json!({
        "@odata.context": "/redfish/v1/$metadata",
        "value": singletons
            .iter()
            .map(|(name, url)| json!({"name": name, "kind": "Singleton", "url": url}))
            .collect::<Vec<_>>(),
    })
}
