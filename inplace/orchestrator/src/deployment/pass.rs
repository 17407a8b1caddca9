//! What one pass over a MachineDeployment reads (its MachineSets, Machines, Nodes and Leases)
//! and the [`Pass`] view of it that every step shares, plus the [`Progress`] the steps carry on.

use std::collections::BTreeMap;
use std::sync::Arc;

use inplace_api::crd::{Machine, MachineDeployment, MachineSet};
use inplace_api::keys::MACHINE_TEMPLATE_HASH_LABEL;
use k8s_openapi::api::core::v1::Node;
use kube::{Api, ResourceExt};

use super::{Resolved, template_hash};
use crate::Context;
use crate::error::{Error, kube};
use crate::leases::LeaseView;
use crate::machineset::owned;

/// The deployment's live MachineSets (controlled by it, not being deleted), split by the
/// current template's hash.
#[derive(Debug)]
pub(super) struct Sets {
    /// The current template's hash: the new set's label and name suffix.
    pub(super) hash: String,
    /// The set whose template hash is the current one, when it exists.
    pub(super) new: Option<MachineSet>,
    /// Every other set.
    pub(super) old: Vec<MachineSet>,
}

impl Sets {
    pub(super) async fn read(md: &MachineDeployment, ctx: &Context) -> Result<Self, Error> {
        let namespace = md.namespace().unwrap_or_default();
        let name = md.name_any();
        let uid = md.uid().unwrap_or_default();
        let sets_api: Api<MachineSet> = Api::namespaced(ctx.client.clone(), &namespace);
        let sets = ctx
            .read(&sets_api)
            .await
            .map_err(kube(format!("list machinesets of {namespace}/{name}")))?;
        let sets: Vec<MachineSet> = sets
            .iter()
            .map(|s| MachineSet::clone(s))
            .filter(|s| s.metadata.deletion_timestamp.is_none())
            .filter(|s| {
                s.owner_references()
                    .iter()
                    .any(|o| o.controller == Some(true) && o.uid == uid)
            })
            .collect();
        let hash = template_hash(&md.spec.template);
        let (new, old): (Vec<MachineSet>, Vec<MachineSet>) = sets
            .into_iter()
            .partition(|s| s.labels().get(MACHINE_TEMPLATE_HASH_LABEL) == Some(&hash));
        Ok(Self {
            hash,
            new: new.into_iter().next(),
            old,
        })
    }
}

/// The Machines, Nodes and Node Leases a pass reads once its MachineSets are in order.
#[derive(Debug)]
pub(super) struct Observed {
    machines: Vec<Arc<Machine>>,
    nodes: BTreeMap<String, Arc<Node>>,
    leases: LeaseView,
}

impl Observed {
    pub(super) async fn read(md: &MachineDeployment, ctx: &Context) -> Result<Self, Error> {
        let namespace = md.namespace().unwrap_or_default();
        let name = md.name_any();
        let machines_api: Api<Machine> = Api::namespaced(ctx.client.clone(), &namespace);
        let machines = ctx
            .read(&machines_api)
            .await
            .map_err(kube(format!("list machines of {namespace}/{name}")))?;
        let nodes_api: Api<Node> = Api::all(ctx.client.clone());
        let nodes: BTreeMap<String, Arc<Node>> = ctx
            .read(&nodes_api)
            .await
            .map_err(kube("list nodes"))?
            .into_iter()
            .map(|n| (n.name_any(), n))
            .collect();
        let leases = ctx
            .leases
            .view(
                &ctx.client,
                ctx.clock.now(),
                ctx.config.node_monitor_grace_period,
            )
            .await
            .map_err(kube("list node leases"))?;
        Ok(Self {
            machines,
            nodes,
            leases,
        })
    }
}

/// Everything the steps of one pass share: the deployment, what was read, and the machines of
/// the new and the old sets.
pub(super) struct Pass<'a> {
    pub(super) md: &'a MachineDeployment,
    pub(super) ctx: &'a Context,
    pub(super) resolved: Resolved,
    pub(super) namespace: String,
    pub(super) hash: &'a str,
    pub(super) sets_api: Api<MachineSet>,
    pub(super) machines_api: Api<Machine>,
    pub(super) new: &'a MachineSet,
    pub(super) old: &'a [MachineSet],
    pub(super) nodes: &'a BTreeMap<String, Arc<Node>>,
    pub(super) leases: &'a LeaseView,
    /// Every Machine in the namespace, as read.
    pub(super) machines: Vec<&'a Machine>,
    pub(super) new_machines: Vec<&'a Machine>,
    /// The old sets' machines, each with its set.
    pub(super) old_machines: Vec<(&'a MachineSet, &'a Machine)>,
    /// The old sets' replicas as read.
    pub(super) old_total: i32,
    /// Old sets still have replicas or machines: the rollout is under way.
    pub(super) rolling: bool,
}

impl<'a> Pass<'a> {
    pub(super) fn new(
        md: &'a MachineDeployment,
        ctx: &'a Context,
        resolved: Resolved,
        hash: &'a str,
        new: &'a MachineSet,
        old: &'a [MachineSet],
        observed: &'a Observed,
    ) -> Self {
        let namespace = md.namespace().unwrap_or_default();
        let sets_api: Api<MachineSet> = Api::namespaced(ctx.client.clone(), &namespace);
        let machines_api: Api<Machine> = Api::namespaced(ctx.client.clone(), &namespace);
        let machines: Vec<&Machine> = observed.machines.iter().map(|m| &**m).collect();
        let new_uid = new.uid().unwrap_or_default();
        let new_machines: Vec<&Machine> = owned(&machines, &new_uid);
        let old_machines: Vec<(&MachineSet, &Machine)> = old
            .iter()
            .flat_map(|s| {
                owned(&machines, &s.uid().unwrap_or_default())
                    .into_iter()
                    .map(move |m| (s, m))
            })
            .collect();
        let old_total: i32 = old.iter().map(|s| s.spec.replicas).sum();
        let rolling = old_total > 0 || !old_machines.is_empty();
        Self {
            md,
            ctx,
            resolved,
            namespace,
            hash,
            sets_api,
            machines_api,
            new,
            old,
            nodes: &observed.nodes,
            leases: &observed.leases,
            machines,
            new_machines,
            old_machines,
            old_total,
            rolling,
        }
    }

    /// The Node of `machine`, when it has one and the Node exists.
    pub(super) fn node_of(&self, machine: &Machine) -> Option<&'a Node> {
        machine
            .node_name()
            .and_then(|n| self.nodes.get(n))
            .map(|n| &**n)
    }
}

/// What steps 2 to 5 found and changed, carried from step to step.
#[derive(Debug)]
pub(super) struct Progress {
    /// Something was written: the pass ends after step 5 and the next one reads it back.
    pub(super) changed: bool,
    /// The new set's replicas, as last written or read.
    pub(super) new_replicas: i32,
    /// The old sets' replicas, re-read after step 3 when anything changed.
    pub(super) old_total: i32,
}

impl Progress {
    pub(super) fn start(pass: &Pass<'_>) -> Self {
        Self {
            changed: false,
            new_replicas: pass.new.spec.replicas,
            old_total: pass.old_total,
        }
    }
}
