//! Two checkpoints side by side: what changed from the first to the second in tasks,
//! decisions, files, open questions, blockers and errors.

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use baton_proto::v1::GetCheckpointRequest;
use baton_proto::v1::checkpoint_service_server::CheckpointService;

use crate::store::Store;
use crate::web::Web;
use crate::web::checkpoint::{Change, CheckpointView, compare};
use crate::web::render::{self, Chrome, WebError, href};
use crate::web::signin::Viewer;

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct CompareQuery {
    a: String,
    b: String,
}

pub struct Side {
    pub view: CheckpointView,
    pub href: String,
}

#[derive(askama::Template)]
#[template(path = "compare.html")]
struct Page {
    chrome: Chrome,
    a: Side,
    b: Side,
    changes: Vec<Change>,
}

async fn side<S: Store>(
    web: &Web<S>,
    viewer: &Viewer,
    field: &str,
    id: &str,
) -> Result<(Side, String), WebError> {
    if id.is_empty() {
        return Err(WebError::BadRequest(format!(
            "{field}: name a checkpoint to compare (pick two on a session's page)"
        )));
    }
    let request = GetCheckpointRequest { checkpoint_id: id.to_owned(), include_payload: false };
    let reply = CheckpointService::get_checkpoint(&web.api, viewer.request(request)).await?.into_inner();
    let c = reply.checkpoint.ok_or_else(|| WebError::NotFound(format!("{field}: no checkpoint {id}")))?;
    let link = href("/session", &[("id", &c.session_id), ("checkpoint", &c.id)]);
    Ok((Side { view: CheckpointView::of(&c), href: link }, c.project))
}

pub async fn page<S: Store>(
    State(web): State<Web<S>>,
    viewer: Viewer,
    Query(q): Query<CompareQuery>,
) -> Response {
    let built = async {
        let (a, project) = side(&web, &viewer, "a", &q.a).await?;
        let (b, _) = side(&web, &viewer, "b", &q.b).await?;
        let changes = compare(&a.view.state, &b.view.state);
        Ok::<_, WebError>(Page { chrome: viewer.chrome(Some(&project)), a, b, changes })
    };
    match built.await {
        Ok(page) => render::page(&page),
        Err(e) => e.into_response(),
    }
}
