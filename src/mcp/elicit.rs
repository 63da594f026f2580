//! `permissions: ask` over MCP: a child's permission request becomes an
//! `elicitation/create` request to the client of the `subagent` call that waits for the
//! run (MCP 2025-06-18 form elicitation, one boolean `allow`).
//!
//! Accept with `allow: true` allows; accept with `allow: false`, decline and cancel deny.
//! No answer within the bound, an error, or a client gone: the policy decides, and the
//! run's warning says so. A withdrawn question (the run stops) is cancelled at the client
//! with `notifications/cancelled`.
//!
//! Protocol 2026-07-28 has no requests from server to client during a call (a server asks
//! by ending the call with an `InputRequiredResult`, and the client calls again with the
//! answers): a run cannot wait inside a call that has ended, so a client on that version is
//! not asked, and `ask` is `policy` with a warning. A server whose own settings say
//! `permissions: ask` offers protocol versions up to 2025-11-25 only
//! ([`newest_protocol`]), so that its clients (Claude Code among them) settle on one in
//! which they can be asked.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema,
    ProtocolVersion, ServerRequest,
};
use rmcp::service::{PeerRequestOptions, RequestContext};
use rmcp::{Peer, RoleServer};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::backends::ask_parent::{Answer, AnswerFuture, Parent, ParentAsk};
use crate::backends::permissions::PermissionMode;

/// The client of one `subagent` call.
struct Client {
    peer: Peer<RoleServer>,
}

/// Whom `ask` can ask during the call `ctx`: its client, when it declared form
/// elicitation on a protocol version that lets a server ask during a call.
pub(crate) fn parent_of(ctx: &RequestContext<RoleServer>) -> ParentAsk {
    let unreachable = |why: &'static str| ParentAsk::Unreachable(Cow::Borrowed(why));
    if ctx
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
    {
        return unreachable(
            "the MCP client speaks protocol 2026-07-28 or later, where a server cannot ask its client while a call runs (a server started with permissions: ask in its config or ORCHESTRATE_PERMISSIONS offers 2025-11-25 at most, in which it can)",
        );
    }
    // A session without `initialize` names the client's capabilities in every request.
    let capability = match ctx.meta.client_capabilities() {
        Some(caps) => caps.elicitation,
        None => ctx
            .peer
            .peer_info()
            .and_then(|info| info.capabilities.elicitation.clone()),
    };
    match capability {
        None => unreachable("the MCP client did not declare the elicitation capability"),
        // Declared without modes: form, as in 2025-06-18.
        Some(c) if c.form.is_none() && c.url.is_some() => {
            unreachable("the MCP client takes only URL elicitation, not a form")
        }
        Some(_) => ParentAsk::Reachable(Arc::new(Client {
            peer: ctx.peer.clone(),
        })),
    }
}

/// The newest protocol version the server offers: 2025-11-25, the last in which a server
/// can ask its client during a call, when the server's own settings (the config files,
/// `ORCHESTRATE_PERMISSIONS`) say `permissions: ask`; else the newest rmcp speaks.
pub(crate) fn newest_protocol() -> ProtocolVersion {
    let cwd = crate::run::RunEnv::cwd_of(None);
    match crate::config::Config::load(&cwd) {
        Ok(config) if config.permissions.value == PermissionMode::Ask => {
            ProtocolVersion::V_2025_11_25
        }
        _ => ProtocolVersion::LATEST,
    }
}

/// `{allow: boolean}`, required.
fn schema() -> ElicitationSchema {
    let schema = json!({
        "type": "object",
        "properties": {
            "allow": {
                "type": "boolean",
                "title": "Allow",
                "description": "Let the subagent make this call",
            }
        },
        "required": ["allow"],
    });
    let serde_json::Value::Object(schema) = schema else {
        unreachable!("a JSON object")
    };
    ElicitationSchema::from_json_schema(schema).expect("a flat schema of one boolean")
}

impl Parent for Client {
    fn ask(&self, message: String, wait: Duration, withdraw: CancellationToken) -> AnswerFuture {
        let peer = self.peer.clone();
        Box::pin(async move {
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message,
                requested_schema: schema(),
            };
            let request = ServerRequest::ElicitRequest(ElicitRequest::new(params));
            let sent = peer
                .send_cancellable_request(request, PeerRequestOptions::no_options())
                .await;
            let mut handle = match sent {
                Ok(handle) => handle,
                Err(e) => return Answer::Unanswered(format!("it could not be asked: {e}")),
            };
            let (answer, cancel) = tokio::select! {
                got = &mut handle.rx => (read(got), None),
                _ = tokio::time::sleep(wait) => (
                    Answer::Unanswered(format!("no answer within {} s", wait.as_secs())),
                    Some("no answer in time: decided by policy"),
                ),
                _ = withdraw.cancelled() => (Answer::Withdrawn, Some("the run is stopping")),
            };
            if let Some(reason) = cancel {
                let _ = handle.cancel(Some(reason.to_string())).await;
            }
            answer
        })
    }
}

fn read(
    got: Result<Result<ClientResult, rmcp::ServiceError>, tokio::sync::oneshot::error::RecvError>,
) -> Answer {
    let result = match got {
        Ok(Ok(ClientResult::ElicitResult(result))) => result,
        Ok(Ok(_)) => return Answer::Unanswered("the client answered something else".into()),
        Ok(Err(e)) => return Answer::Unanswered(format!("the client answered with an error: {e}")),
        Err(_) => return Answer::Unanswered("the client went away".into()),
    };
    match result.action {
        ElicitationAction::Accept => match result.content.as_ref().and_then(|c| c.get("allow")) {
            Some(serde_json::Value::Bool(true)) => Answer::Allow,
            Some(serde_json::Value::Bool(false)) => {
                Answer::Deny(Cow::Borrowed("the parent denied it"))
            }
            _ => Answer::Deny(Cow::Borrowed("the parent accepted without allow: true")),
        },
        ElicitationAction::Decline => Answer::Deny(Cow::Borrowed("the parent declined")),
        ElicitationAction::Cancel => {
            Answer::Deny(Cow::Borrowed("the parent cancelled the question"))
        }
        // An action of a later protocol: not an allow.
        _ => Answer::Deny(Cow::Borrowed("the parent did not accept")),
    }
}
