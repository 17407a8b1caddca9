//! The agent state a pass works on, owned together with its store: every change goes through a
//! method that writes the whole document once ([`Journal::record`] for the plan), so a step can
//! neither change the state without persisting it nor persist one change twice. Where a pass
//! writes is what crash safety rests on (the rules in [`crate::state`]).

use crate::state::{self, AgentState, Applied, Plan, StateError};
use crate::store::StateStore;

/// The agent state in memory, always equal to what the store holds after each write returned.
pub(crate) struct Journal<'s> {
    store: &'s dyn StateStore,
    state: AgentState,
}

impl std::fmt::Debug for Journal<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl<'s> Journal<'s> {
    /// The state `store` holds (empty when it holds none); writes nothing.
    pub(crate) async fn load(store: &'s dyn StateStore) -> Result<Self, StateError> {
        let state = state::load(store).await?;
        Ok(Self { store, state })
    }

    /// An empty state, not written: what a store holds once its corrupt document was set aside.
    pub(crate) fn empty(store: &'s dyn StateStore) -> Self {
        Self {
            store,
            state: AgentState::default(),
        }
    }

    /// Writes `state` in place of whatever `store` held (a corrupt document set aside).
    pub(crate) async fn replace(
        store: &'s dyn StateStore,
        state: AgentState,
    ) -> Result<Self, StateError> {
        let journal = Self { store, state };
        journal.write().await?;
        Ok(journal)
    }

    /// The state as last written.
    pub(crate) fn state(&self) -> &AgentState {
        &self.state
    }

    /// The plan being carried out.
    ///
    /// # Panics
    /// Without a plan: a pass carries out steps only after [`Journal::start_plan`].
    pub(crate) fn plan(&self) -> &Plan {
        self.state
            .plan
            .as_ref()
            .expect("reconcile creates the plan first")
    }

    /// Writes `plan` as the plan being carried out, in place of any earlier one.
    pub(crate) async fn start_plan(&mut self, plan: Plan) -> Result<(), StateError> {
        self.state.plan = Some(plan);
        self.write().await
    }

    /// Applies `change` to the plan and writes the state: one write per recorded change.
    ///
    /// # Panics
    /// Without a plan, as [`Journal::plan`].
    pub(crate) async fn record(
        &mut self,
        change: impl FnOnce(&mut Plan),
    ) -> Result<(), StateError> {
        change(
            self.state
                .plan
                .as_mut()
                .expect("reconcile creates the plan first"),
        );
        self.write().await
    }

    /// The completed plan becomes the last-applied OSC; writes the state.
    ///
    /// # Panics
    /// Without a plan, as [`Journal::plan`].
    pub(crate) async fn finish_plan(&mut self) -> Result<(), StateError> {
        let plan = self.state.plan.take().expect("a completed pass has a plan");
        self.state.applied = Some(Applied {
            checksum: plan.checksum,
            osc: plan.osc,
        });
        self.write().await
    }

    async fn write(&self) -> Result<(), StateError> {
        state::save(self.store, &self.state).await
    }
}
