//! Running long-lived loops (the agent's watches and reconcile; the heartbeat's beats and pod
//! watch) side by side in one task.

use std::future::Future;
use std::pin::Pin;

use futures::StreamExt;
use futures::stream::FuturesUnordered;

/// One of the loops [`run_together`] runs.
pub(crate) type Loop<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// Runs `loops` until every one has finished, polling each only when it was woken. (`join!`
/// polls every branch whenever any one is woken: with a thousand simulated nodes, each Lease
/// renewal would poll its agent's every watch.) Loops are first polled in the given order, then
/// in the order they are woken, so simulated runs stay reproducible.
pub(crate) async fn run_together(loops: Vec<Loop<'_>>) {
    let mut running: FuturesUnordered<Loop<'_>> = loops.into_iter().collect();
    while running.next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;

    /// Each loop runs to its end; a loop that sleeps does not hold up the others.
    #[tokio::test(start_paused = true)]
    async fn every_loop_runs_to_its_end() {
        let finished: Arc<Mutex<Vec<&str>>> = Arc::default();
        let finish = |name: &'static str, after: u64| {
            let finished = finished.clone();
            Box::pin(async move {
                tokio::time::sleep(Duration::from_secs(after)).await;
                finished.lock().unwrap().push(name);
            }) as Loop<'static>
        };
        run_together(vec![
            finish("slow", 3),
            finish("fast", 1),
            finish("middle", 2),
        ])
        .await;
        assert_eq!(*finished.lock().unwrap(), ["fast", "middle", "slow"]);
    }
}
