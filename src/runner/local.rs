//! The local runner: the child runs here, as orchestrate started it. Nothing to prepare,
//! no queue, a stop is a signal to its tree, and it is gone once its tree is reaped.

use super::{
    BoxFuture, Ended, EngineError, JobSpec, Kind, Launch, LocalStop, Queue, Runner, Settled, Stop,
};

pub(super) const KIND: Kind = Kind {
    name: "local",
    title: "this machine",
    here: true,
    start,
    // Its child is in orchestrate's own tree, which dies with orchestrate: nothing is
    // ever left for a watchdog.
    abandon: |_| Box::pin(async { Ok(()) }),
};

fn start(_: &JobSpec<'_>) -> Box<dyn Runner> {
    Box::new(Local)
}

#[derive(Debug)]
struct Local;

impl Runner for Local {
    fn prepare(&mut self) -> BoxFuture<'_, Result<(), EngineError>> {
        Box::pin(async { Ok(()) })
    }

    fn wrap(&self, child: Launch) -> Launch {
        child
    }

    fn queue(&mut self) -> Option<Queue> {
        None
    }

    fn stop(&mut self, stop: Stop, _started: bool) -> LocalStop {
        LocalStop {
            signal: Some(stop),
            kill_after: None,
        }
    }

    fn settle<'a>(&'a mut self, _: Ended<'a>) -> BoxFuture<'a, Settled> {
        Box::pin(async { Settled::default() })
    }
}
