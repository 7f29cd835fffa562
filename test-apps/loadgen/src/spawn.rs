//! `loadgen spawn`: the bare cost of starting N stdio apps: spawn them all at once, complete
//! `initialize` and `tools/list` with each concurrently, and time it from before the first
//! spawn to the last listing. The yardstick for the gateway's own start-up of the same apps.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};

use crate::calls::{Target, connect};
use crate::stats::{self, Sample};

pub(crate) async fn run(count: usize, target: &Target) -> anyhow::Result<Value> {
    let started = Instant::now();
    let tasks: Vec<_> = (0..count)
        .map(|_| {
            let target = target.clone();
            tokio::spawn(async move {
                let begun = Instant::now();
                let client = connect(&target).await?;
                let tools = client
                    .list_tools(None)
                    .await
                    .context("tools/list")?
                    .tools
                    .len();
                anyhow::Ok((client, tools, begun.elapsed()))
            })
        })
        .collect();
    let mut clients = Vec::with_capacity(count);
    let mut sample = Sample::default();
    let mut tools = 0;
    for task in tasks {
        match task.await.context("a task panicked")? {
            Ok((client, listed, took)) => {
                clients.push(client);
                sample.latencies.push(took);
                tools = listed;
            }
            Err(err) => {
                sample.errors += 1;
                sample.first_error.get_or_insert_with(|| format!("{err:#}"));
            }
        }
    }
    let all: Duration = started.elapsed();
    sample.wall = all;
    for client in clients {
        let _ = client.cancel().await;
    }
    let mut row = stats::row("spawn + initialize + tools/list", count, 1, &sample);
    row["allSeconds"] = json!((all.as_secs_f64() * 10_000.0).round() / 10_000.0);
    row["toolsPerApp"] = json!(tools);
    Ok(row)
}
