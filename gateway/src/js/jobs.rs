//! One call of an API's JS, as a value that can move to the thread its
//! context lives on ([`Job`]), and the two phases' adapters onto the
//! middleware contract ([`JsResponse`], [`JsEndpoint`]).

use std::rc::Rc;
use std::time::Instant;

use super::vm::{CallError, Vm};
use super::{empty_request, ApiVm};
use crate::middleware::{
    Endpoint, Flow, MwError, MwFutureOf, MwRequest, MwResponse, ResponseMiddleware,
};
use crate::stats::RunRecorder;

/// A call of entry `index` of one phase, with the data it reads and edits.
pub(crate) enum Job {
    /// A `pre`/`post` entry on the request.
    Request { index: usize, req: MwRequest },
    /// A response entry on the upstream's answer.
    Response {
        index: usize,
        req: MwRequest,
        resp: MwResponse,
    },
    /// A virtual endpoint on the request.
    Endpoint { index: usize, req: MwRequest },
}

/// What a job produced.
pub(crate) enum Done {
    /// The request phase's flow.
    Flow(Flow),
    /// The response was edited in place (in the job).
    Edited,
    /// A virtual endpoint's answer.
    Answer(MwResponse),
}

impl Job {
    /// The bytes of the bodies the call is given.
    pub(crate) fn body_len(&self) -> usize {
        match self {
            Job::Request { req, .. } | Job::Endpoint { req, .. } => req.body.len(),
            Job::Response { req, resp, .. } => req.body.len() + resp.body.len(),
        }
    }

    /// Runs the job on `vm` within `deadline`.
    /// Its allocations count towards the thread's boa heap while it runs
    /// (`memory.rs`), and the heap is checked after it.
    pub(crate) async fn run(&mut self, vm: &mut Vm, deadline: Instant) -> Result<Done, CallError> {
        // What TykMakeHttpRequest and TykBatchRequest may wait until, in
        // every phase and in the promise jobs after it (a response hook's
        // or a virtual endpoint's call out was bounded by 5 s of its own).
        let _deadline = super::tykapi::call_scope(deadline);
        let r = super::memory::counted(async {
            let r = self.run_on(vm, deadline).await;
            // The promise jobs the call queued run once its answer is read
            // (`reactions.rs`), also after a throw; not in a context about
            // to be discarded. A job's failure is the call's, unless the
            // call had failed already (then only one that spends the
            // context replaces it).
            if r.as_ref().is_err_and(CallError::discards_context) {
                return r;
            }
            match (r, vm.run_jobs(deadline)) {
                (r, Ok(())) => r,
                (Ok(_), Err(e)) => Err(e),
                (Err(e), Err(j)) if !j.discards_context() => Err(e),
                (Err(_), Err(j)) => Err(j),
            }
        })
        .await;
        // A failure's message was made here and leaves with the answer.
        if let Err(CallError::Failed(e) | CallError::Spent(e)) = &r {
            crate::heap::released(e.message_capacity());
        }
        vm.check_heap();
        r
    }

    async fn run_on(&mut self, vm: &mut Vm, deadline: Instant) -> Result<Done, CallError> {
        match self {
            Job::Request { index, req } => vm.call(*index, req, deadline).await.map(Done::Flow),
            Job::Response { index, req, resp } => vm
                .call_response(*index, req, resp, deadline)
                .await
                .map(|()| Done::Edited),
            Job::Endpoint { index, req } => vm
                .call_endpoint(*index, req, deadline)
                .await
                .map(Done::Answer),
        }
    }

    /// An empty job of the same kind, for when the job itself is lost
    /// with an abandoned VM thread.
    pub(crate) fn placeholder(&self) -> Job {
        let addr = match self {
            Job::Request { req, .. } | Job::Response { req, .. } | Job::Endpoint { req, .. } => {
                req.remote_addr
            }
        };
        Job::Endpoint {
            index: 0,
            req: empty_request(addr),
        }
    }
}

/// A response entry on one worker.
pub(crate) struct JsResponse {
    pub(crate) name: String,
    pub(crate) index: usize,
    pub(crate) api: Rc<ApiVm>,
    /// The time its calls run on a VM thread.
    pub(crate) runs: Option<RunRecorder>,
}

impl ResponseMiddleware for JsResponse {
    fn name(&self) -> &str {
        &self.name
    }

    fn time_vm_runs(&mut self, runs: RunRecorder) {
        if let ApiVm::Threads(_) = &*self.api {
            self.runs = Some(runs);
        }
    }

    fn call<'a>(&'a self, req: &'a MwRequest, resp: &'a mut MwResponse) -> MwFutureOf<'a, ()> {
        Box::pin(async move {
            // Owned copies travel to the VM thread; the request has no body
            // here, so this is its head only. The response moves.
            let placeholder = MwResponse {
                status: resp.status,
                headers: http::HeaderMap::new(),
                body: bytes::Bytes::new(),
            };
            let job = Job::Response {
                index: self.index,
                req: req.clone(),
                resp: std::mem::replace(resp, placeholder),
            };
            let (back, done) = self.api.run(&self.name, job, self.runs.as_ref()).await;
            if let Job::Response { resp: back, .. } = back {
                *resp = back;
            }
            done.map(|_| ())
        })
    }
}

/// A virtual endpoint on one worker.
pub(crate) struct JsEndpoint {
    pub(crate) name: String,
    pub(crate) index: usize,
    pub(crate) api: Rc<ApiVm>,
    /// The time its calls run on a VM thread.
    pub(crate) runs: Option<RunRecorder>,
}

impl Endpoint for JsEndpoint {
    fn name(&self) -> &str {
        &self.name
    }

    fn time_vm_runs(&mut self, runs: RunRecorder) {
        if let ApiVm::Threads(_) = &*self.api {
            self.runs = Some(runs);
        }
    }

    fn call<'a>(&'a self, req: &'a MwRequest) -> MwFutureOf<'a, MwResponse> {
        Box::pin(async move {
            let job = Job::Endpoint {
                index: self.index,
                req: req.clone(),
            };
            match self.api.run(&self.name, job, self.runs.as_ref()).await.1? {
                Done::Answer(resp) => Ok(resp),
                _ => Err(MwError::internal(format!(
                    "{}: the JS host answered the wrong phase",
                    self.name
                ))),
            }
        })
    }
}
