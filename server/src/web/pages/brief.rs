//! What an agent starting in the project now would be told: the brief at each agent's
//! default budget (the client's: 9,000 characters, Codex's 6,000, which it shows inline).

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use baton_proto::v1::GetBriefRequest;
use baton_proto::v1::brief_service_server::BriefService;

use crate::store::Store;
use crate::web::Web;
use crate::web::render::{self, Chrome, WebError, visible};
use crate::web::signin::Viewer;

/// The agents and their hooks' default budgets (client/src/agents: `default_budget`).
const AGENTS: [(&str, i32); 2] = [("Claude Code, Gemini CLI, Cursor", 9000), ("Codex", 6000)];

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct BriefQuery {
    project: String,
    branch: String,
}

pub struct Preview {
    pub agents: &'static str,
    pub budget: i32,
    pub text: String,
    pub truncated: bool,
}

#[derive(askama::Template)]
#[template(path = "brief.html")]
struct Page {
    chrome: Chrome,
    project: String,
    branch: String,
    previews: Vec<Preview>,
}

pub async fn page<S: Store>(
    State(web): State<Web<S>>,
    viewer: Viewer,
    Query(q): Query<BriefQuery>,
) -> Response {
    let mut previews = Vec::new();
    for (agents, budget) in AGENTS {
        let request = GetBriefRequest {
            project: q.project.clone(),
            branch: q.branch.clone(),
            budget_chars: budget,
            ..Default::default()
        };
        match BriefService::get_brief(&web.api, viewer.request(request)).await {
            Ok(reply) => {
                let brief = reply.into_inner().brief.unwrap_or_default();
                previews.push(Preview {
                    agents,
                    budget,
                    text: visible(&brief.text),
                    truncated: brief.truncated,
                });
            }
            Err(e) => return WebError::from(e).into_response(),
        }
    }
    render::page(&Page {
        chrome: viewer.chrome(Some(&q.project)),
        project: q.project,
        branch: q.branch,
        previews,
    })
}
