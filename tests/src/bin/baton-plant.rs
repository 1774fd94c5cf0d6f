//! Writes records through the real gRPC API for the browser suite (tests/web), where the
//! client CLI has no command for them: an agent SDK's item log, and a session whose
//! checkpoint carries hostile content (markup, `javascript:` links, terminal escapes, a 1 MB
//! string). Prints what it made as JSON.
//!
//!     baton-plant --server URL --token T --project P items --key K --count N
//!     baton-plant --server URL --token T --project P hostile

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a test tool: a failure is a panic with its message"
)]

use baton_proto::v1::{
    AgentKind, AppendItemsRequest, CheckpointKind, CheckpointState, CreateCheckpointRequest, Decision,
    NewItem, StartSessionRequest, Task, ToolCall, WriteOptions,
};
use baton_tests::Clients;
use clap::{Parser, Subcommand};
use tonic::metadata::MetadataValue;

#[derive(Parser)]
struct Args {
    #[arg(long)]
    server: String,
    #[arg(long, default_value = "")]
    token: String,
    #[arg(long)]
    project: String,
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// An item log of `count` JSON items, with a summary.
    Items {
        #[arg(long)]
        key: String,
        #[arg(long, default_value_t = 3)]
        count: usize,
    },
    /// A session and a checkpoint full of hostile strings.
    Hostile,
}

const HOSTILE: &str =
    "<script>alert('x')</script><img src=x onerror=alert(1)><a href=\"javascript:alert(2)\">j</a>";

fn with<T>(token: &str, msg: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    if !token.is_empty() {
        r.metadata_mut().insert("authorization", MetadataValue::try_from(format!("Bearer {token}")).unwrap());
    }
    r
}

fn write() -> WriteOptions {
    WriteOptions { request_id: uuid::Uuid::new_v4().to_string(), host: "plant".into(), ..Default::default() }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    let channel =
        tonic::transport::Channel::from_shared(args.server.clone()).unwrap().connect().await.unwrap();
    let mut c = Clients::new(channel);
    let t = args.token.as_str();
    match args.what {
        What::Items { key, count } => {
            let items = (0..count)
                .map(|i| NewItem {
                    key: format!("item-{i}"),
                    value: serde_json::json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("message {i}")})
                        .to_string()
                        .into_bytes(),
                    ..Default::default()
                })
                .collect();
            let request = AppendItemsRequest {
                project: args.project,
                key: key.clone(),
                items,
                summary_json: Some(r#"{"title":"A planted conversation"}"#.into()),
                write: Some(write()),
            };
            c.items.append_items(with(t, request)).await.unwrap();
            println!("{}", serde_json::json!({ "key": key }));
        }
        What::Hostile => {
            let start = StartSessionRequest {
                project: args.project.clone(),
                agent: AgentKind::Custom as i32,
                host: "plant-host".into(),
                user: "mallory".into(),
                goal: format!("{HOSTILE} \u{1b}[31mred\u{1b}[0m"),
                write: Some(write()),
                ..Default::default()
            };
            let session =
                c.sessions.start_session(with(t, start)).await.unwrap().into_inner().session.unwrap();
            let big = "A".repeat(1_000_000);
            let state = CheckpointState {
                active_tasks: vec![Task {
                    content: HOSTILE.into(),
                    status: "javascript:alert(3)".into(),
                    ..Default::default()
                }],
                decisions: vec![Decision {
                    decision: HOSTILE.into(),
                    rationale: big.clone(),
                    ..Default::default()
                }],
                files_modified: vec!["\u{1b}]8;;https://evil.example\u{7}link\u{1b}]8;;\u{7}".into()],
                tool_history: vec![ToolCall { name: HOSTILE.into(), summary: big.clone(), failed: true }],
                errors: vec![big],
                summary: HOSTILE.into(),
                ..Default::default()
            };
            let checkpoint = CreateCheckpointRequest {
                session_id: session.id.clone(),
                kind: CheckpointKind::Manual as i32,
                reason: HOSTILE.into(),
                state: Some(state),
                payload: format!(
                    r#"{{"html": "{}", "link": "javascript:alert(4)"}}"#,
                    "<script>alert(5)</script>"
                )
                .into_bytes(),
                payload_content_type: "application/json".into(),
                write: Some(write()),
                ..Default::default()
            };
            c.checkpoints.create_checkpoint(with(t, checkpoint)).await.unwrap();
            println!("{}", serde_json::json!({ "session": session.id }));
        }
    }
}
