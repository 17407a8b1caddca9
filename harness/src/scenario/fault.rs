//! Faults: what goes wrong, at a time or on an event.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::expect::NodeState;
use super::{BootBehaviour, Located, NodeName, Span};

/// A fault and when it fires. Each fires once.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Fault {
    /// When it fires.
    pub when: Trigger,
    /// What happens.
    #[serde(rename = "do")]
    pub action: FaultAction,
}

/// When a fault fires.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Trigger {
    /// This long after the scenario started.
    After(Span),
    /// When a node's in-place update reaches a state.
    NodeReaches(NodeEvent),
    /// When a line of a node's console matches a regex.
    Console(ConsoleMatch),
    /// When a node starts its Nth boot since the scenario started (1 = the first).
    Boot(BootCount),
}

/// A node reaching a state.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeEvent {
    pub node: NodeName,
    pub state: NodeState,
}

/// A console line on a node.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConsoleMatch {
    pub node: NodeName,
    /// A regular expression.
    pub matches: String,
}

/// A node's Nth boot.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BootCount {
    pub node: NodeName,
    pub count: u32,
}

/// What goes wrong.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum FaultAction {
    /// A power action through the node's BMC.
    Power(PowerFault),
    /// From now on, this node downloads a build of a version that boots like this (on this node
    /// only, until a later `publish` of the version or `bootFailure` for it).
    BootFailure(BootFailure),
    /// Power is cut at a point of the update.
    PowerCut(PowerCut),
    /// The node's BMC misbehaves.
    Bmc(BmcFault),
    /// The node loses its network for a while.
    Partition(Partition),
    /// A component is killed, and started again after a while unless `restartAfter` is absent.
    /// On a node, the agent and the kubelet are killed apart: the agent's death leaves the
    /// heartbeat running (the node stays Ready), the kubelet's stops it.
    Kill(Kill),
    /// These nodes die (power off; their leases expire) although they are not being updated.
    NodesDie(Vec<NodeName>),
    /// The image server answers this node's downloads badly.
    ImageServer(ImageServerFault),
}

impl FaultAction {
    /// Its key in a scenario file (`powerCut`), as log spans name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Power(_) => "power",
            Self::BootFailure(_) => "bootFailure",
            Self::PowerCut(_) => "powerCut",
            Self::Bmc(_) => "bmc",
            Self::Partition(_) => "partition",
            Self::Kill(_) => "kill",
            Self::NodesDie(_) => "nodesDie",
            Self::ImageServer(_) => "imageServer",
        }
    }

    /// The one node it acts on, if it names exactly one.
    pub fn node(&self) -> Option<&str> {
        let node = match self {
            Self::Power(f) => &f.node,
            Self::BootFailure(f) => &f.node,
            Self::PowerCut(f) => &f.node,
            Self::Bmc(f) => &f.node,
            Self::Partition(f) => &f.node,
            Self::ImageServer(f) => &f.node,
            Self::Kill(f) => f.node.as_ref()?,
            Self::NodesDie(nodes) => match nodes.as_slice() {
                [node] => node,
                _ => return None,
            },
        };
        Some(node.value.as_str())
    }
}

/// The image server misbehaving towards one node.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ImageServerFault {
    pub node: NodeName,
    pub answer: ImageServerAnswer,
    /// How many requests it affects (absent: all from now on).
    #[serde(default)]
    pub count: Option<u32>,
}

/// A bad answer of the image server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ImageServerAnswer {
    /// The connection fails (a retriable error).
    Unreachable,
    /// This HTTP status (5xx, 408 and 429 are retriable; other 4xx are not).
    Status(u16),
    /// The slot's files (not its manifest) arrive with a flipped byte: their checksums fail,
    /// which is not retriable.
    Corrupt,
}

/// A power action on a node.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PowerFault {
    pub node: NodeName,
    pub action: PowerAction,
}

/// Power actions as a person at a BMC console gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PowerAction {
    On,
    Off,
    Cycle,
    Reset,
    GracefulShutdown,
}

/// How a version boots on one node: the image server hands the node a build of `version` that
/// boots like `boot` from its next download of it on. A copy already on the node's ESP boots as
/// before until the node installs the version again (as a re-update after `clearFailed` does).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BootFailure {
    pub node: NodeName,
    /// The version this applies to (one of `images`); the node's other versions are untouched.
    pub version: Located<String>,
    /// `ok` undoes an earlier failure: the node gets a good build.
    pub boot: BootBehaviour,
}

/// Power cut at a point of the update.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PowerCut {
    pub node: NodeName,
    pub during: PowerCutPoint,
    /// Power comes back after this long (the node then boots again).
    #[serde(default = "default_power_back")]
    pub power_back_after: Span,
}

fn default_power_back() -> Span {
    Span(std::time::Duration::from_secs(30))
}

/// Where in the update the power goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PowerCutPoint {
    /// While the slot artifact downloads.
    Download,
    /// While the new boot entry and its files are written to the ESP.
    SlotWrite,
    /// During the first boot of the new entry.
    FirstBoot,
}

/// A BMC quirk or fault.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BmcFault {
    pub node: NodeName,
    pub quirk: BmcQuirk,
    /// How many requests it affects (absent: all from now on).
    #[serde(default)]
    pub count: Option<u32>,
}

/// BMC misbehaviour.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum BmcQuirk {
    /// Accepts power-on and does nothing.
    IgnorePowerOn,
    /// Answers every request with this HTTP status (Redfish) or completion code (IPMI).
    Status(u16),
    /// Answers after this long.
    Latency(Span),
    /// Forgets every session.
    ExpireSessions,
}

/// A network partition of a node.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Partition {
    pub node: NodeName,
    #[serde(rename = "for")]
    pub duration: Span,
}

/// Kill a component.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Kill {
    pub component: Located<Component>,
    /// For the agent and the kubelet (required for them, refused for the others): which node's.
    #[serde(default)]
    pub node: Option<NodeName>,
    /// Start it again after this long.
    #[serde(default)]
    pub restart_after: Option<Span>,
}

/// A component of the system under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Component {
    Orchestrator,
    /// A node's agent (gardener-node-agent's in-place part).
    Agent,
    Watchdog,
    /// A node's kubelet: its heartbeat (Lease renewals, the Ready condition) and its pods.
    Kubelet,
}

impl Component {
    /// Whether one of it runs on each node (`kill` names the node).
    pub fn on_a_node(self) -> bool {
        matches!(self, Self::Agent | Self::Kubelet)
    }

    /// Its name in scenarios and messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::Orchestrator => "orchestrator",
            Self::Agent => "agent",
            Self::Watchdog => "watchdog",
            Self::Kubelet => "kubelet",
        }
    }
}
