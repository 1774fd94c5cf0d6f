//! The `why` tool: `baton why` for the agent, so that before changing a line it can read the
//! session, prompt, task and decisions that put it there.

use super::params;
use super::tools::{Answer, Call, Failure};
use crate::usecase::why;

pub async fn why(call: &Call<'_>, p: params::Why) -> Answer {
    let range = match (p.first_line, p.last_line) {
        (None, None) => None,
        (Some(a), b) => {
            let b = b.unwrap_or(a);
            if a == 0 || b < a {
                return Err(Failure::Arguments(format!(
                    "lines are counted from 1 and last_line ({b}) may not come before first_line ({a})"
                )));
            }
            Some((a as usize, b as usize))
        }
        (None, Some(_)) => return Err(Failure::Arguments("last_line needs first_line".into())),
    };
    if crate::project::git::toplevel(&call.dir).is_none() {
        return Err(Failure::Tool(format!(
            "{} is not in a git repository: there are no commits to explain lines by.",
            call.dir.display()
        )));
    }
    let Some(mut hub) = call.hub().await else {
        return Err(Failure::Tool("The Baton hub cannot be reached: try again later.".into()));
    };
    let server = &call.ctx.settings.server;
    let answer = why::why(&mut hub, server, &call.project.key, &call.project.root, &call.dir, &p.file, range)
        .await
        .map_err(|e| Failure::Tool(format!("{e:#}")))?;
    Ok(why::text(&answer))
}
