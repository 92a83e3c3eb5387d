//! The deliverer: sends the store's webhook outbox, at least once, with backoff.
//!
//! Each round claims the due deliveries (a claim hides them from every other replica's
//! deliverer for [`DeliveryOptions::claim_lease`]; one that dies mid-attempt only delays
//! them), signs each with its webhook's live secrets, posts it through the webhook poster (the
//! egress SSRF guard, verified https) and records how it went. A 2xx answer is delivered;
//! anything else is retried after `retry_base × 2^(attempt-1)` (at most `retry_max`), scaled by
//! a random factor in [0.5, 1] so retries of many deliveries spread out, until `max_attempts`.
//! A receiver that stays down costs interactions nothing: events are written with the status
//! change, and only this task waits for the receiver.

use std::sync::Arc;
use std::time::Duration;

use hookbox_egress::EgressPoster;
use hookbox_protocol::post::{HttpError, HttpRequest};
use hookbox_store::{AttemptOutcome, ClaimedDelivery, Store};
use tokio::sync::Notify;

use crate::signing;

/// How deliveries are attempted.
#[derive(Debug, Clone)]
pub struct DeliveryOptions {
    /// Attempts per delivery, the first included.
    pub max_attempts: u32,
    /// The wait before the first retry; doubled each time.
    pub retry_base: Duration,
    /// The longest wait between attempts.
    pub retry_max: Duration,
    /// Failed attempts in a row (over all of a webhook's deliveries) after which the webhook is
    /// `disabled_due_to_failed_deliveries`; 0: never.
    pub disable_after: u32,
    /// Connect, send and read the answer of one attempt together.
    pub timeout: Duration,
    /// Attempts in flight at once.
    pub concurrency: usize,
    /// The longest sleep between rounds: picks up other replicas' events and lapsed claims.
    pub poll: Duration,
    /// How much of a receiver's answer is read (it is not kept).
    pub response_limit: usize,
}

impl Default for DeliveryOptions {
    fn default() -> Self {
        Self {
            max_attempts: 12,
            retry_base: Duration::from_secs(5),
            retry_max: Duration::from_secs(3600),
            disable_after: 20,
            timeout: Duration::from_secs(15),
            concurrency: 8,
            poll: Duration::from_secs(5),
            response_limit: 4096,
        }
    }
}

impl DeliveryOptions {
    /// How long a claim hides a delivery: longer than any attempt can take.
    pub fn claim_lease(&self) -> Duration {
        self.timeout + Duration::from_secs(30)
    }

    /// The wait after failed attempt number `attempt` (1 for the first), before jitter.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(30);
        self.retry_base
            .saturating_mul(1u32 << exponent)
            .min(self.retry_max)
    }
}

/// What stops a round (the store did not answer); the deliverer logs it and tries again later.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("webhook deliveries: {0}")]
    Store(#[from] hookbox_store::Error),
}

/// Sends the outbox. Cheap to share: [`Deliverer::waker`] wakes it when an event was written.
#[derive(Debug)]
pub struct Deliverer {
    store: Arc<dyn Store>,
    poster: Arc<EgressPoster>,
    options: DeliveryOptions,
    wake: Arc<Notify>,
}

impl Deliverer {
    pub fn new(store: Arc<dyn Store>, poster: Arc<EgressPoster>, options: DeliveryOptions) -> Self {
        Self {
            store,
            poster,
            options,
            wake: Arc::new(Notify::new()),
        }
    }

    /// Notified after an event was written, so it goes out at once instead of at the next poll.
    pub fn waker(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Delivers until `stop` resolves. An attempt in flight then finishes (bounded by the
    /// timeout); what is still pending stays in the store for the next start.
    pub async fn run(&self, stop: impl std::future::Future<Output = ()>) {
        tokio::pin!(stop);
        loop {
            if let Err(e) = self.deliver_due().await {
                tracing::warn!(error = %e, "webhook deliveries: the store did not answer; trying again");
            }
            let wait = match self.store.next_webhook_delivery_ms().await {
                Ok(Some(due)) => {
                    let ms = u64::try_from(due - hookbox_store::webhooks::now_ms()).unwrap_or(0);
                    Duration::from_millis(ms).min(self.options.poll)
                }
                _ => self.options.poll,
            };
            tokio::select! {
                () = &mut stop => return,
                () = self.wake.notified() => {}
                () = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// One round: claims and attempts every delivery due now, `concurrency` at a time; how many
    /// were attempted.
    pub async fn deliver_due(&self) -> Result<usize, DeliveryError> {
        let limit = u32::try_from(self.options.concurrency.max(1)).unwrap_or(u32::MAX);
        let mut attempted = 0;
        loop {
            let now = hookbox_store::webhooks::now_ms();
            let lease = i64::try_from(self.options.claim_lease().as_millis()).unwrap_or(i64::MAX);
            let claimed = self
                .store
                .claim_webhook_deliveries(now, now.saturating_add(lease), limit)
                .await?;
            let count = claimed.len();
            let mut attempts = tokio::task::JoinSet::new();
            for delivery in claimed {
                let this = Attempt {
                    store: self.store.clone(),
                    poster: self.poster.clone(),
                    options: self.options.clone(),
                };
                attempts.spawn(async move { this.run(delivery).await });
            }
            while let Some(done) = attempts.join_next().await {
                if let Ok(Err(e)) = done {
                    tracing::warn!(error = %e, "webhook delivery: could not record the attempt");
                }
            }
            attempted += count;
            if count < limit as usize {
                return Ok(attempted);
            }
        }
    }
}

/// One attempt of one delivery.
struct Attempt {
    store: Arc<dyn Store>,
    poster: Arc<EgressPoster>,
    options: DeliveryOptions,
}

impl Attempt {
    async fn run(self, delivery: ClaimedDelivery) -> Result<(), DeliveryError> {
        let started = std::time::Instant::now();
        let now = hookbox_store::time::now_rfc3339();
        let attempt = delivery.attempts + 1;
        let Some(keys) = self
            .store
            .webhook_signing_keys(&delivery.project, &delivery.webhook_id, &now)
            .await?
        else {
            return Ok(()); // deleted with its webhook
        };
        let timestamp = hookbox_store::webhooks::now_ms() / 1000;
        let body = delivery.payload.as_bytes();
        let result = match signing::headers(
            keys.iter().map(|k| k.secret.as_str()),
            &delivery.id,
            timestamp,
            body,
        ) {
            Ok(headers) => {
                self.poster
                    .post(HttpRequest {
                        url: delivery.uri.clone(),
                        headers,
                        body: body.to_vec(),
                        timeout: self.options.timeout,
                        response_limit: self.options.response_limit,
                    })
                    .await
            }
            Err(e) => Err(HttpError::Other(e.to_string())),
        };
        let (outcome, status) = match result {
            Ok(response) if (200..300).contains(&response.status) => (
                AttemptOutcome::Delivered {
                    status: response.status,
                },
                Some(response.status),
            ),
            other => {
                let (error, status) = match other {
                    Ok(response) => (
                        format!("the receiver answered HTTP {}", response.status),
                        Some(response.status),
                    ),
                    Err(e) => (describe(&e), None),
                };
                let retry_at_ms = (attempt < self.options.max_attempts).then(|| {
                    let wait = self
                        .options
                        .backoff(attempt)
                        .mul_f64(rand::random_range(0.5..=1.0));
                    hookbox_store::webhooks::now_ms()
                        .saturating_add(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX))
                });
                (
                    AttemptOutcome::Failed {
                        error,
                        status,
                        retry_at_ms,
                        disable_after: self.options.disable_after,
                    },
                    status,
                )
            }
        };
        let label = match &outcome {
            AttemptOutcome::Delivered { .. } => "delivered",
            AttemptOutcome::Failed {
                retry_at_ms: Some(_),
                ..
            } => "retrying",
            AttemptOutcome::Failed { .. } => "gave_up",
        };
        let error = match &outcome {
            AttemptOutcome::Failed { error, .. } => error.as_str(),
            AttemptOutcome::Delivered { .. } => "",
        };
        tracing::info!(
            name: hookbox_protocol::events::WEBHOOK_DELIVERY,
            target: "hookbox_webhooks",
            project = %delivery.project,
            webhook_id = %delivery.webhook_id,
            delivery_id = %delivery.id,
            event = %delivery.event_type,
            outcome = label,
            status = status.unwrap_or(0),
            attempt,
            error,
            duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            "webhook delivery"
        );
        self.store
            .finish_webhook_delivery(&delivery.id, &outcome, &hookbox_store::time::now_rfc3339())
            .await?;
        Ok(())
    }
}

/// Why an attempt failed, without the URL (a webhook URL may carry a token in its path or
/// query).
fn describe(e: &HttpError) -> String {
    match e {
        HttpError::InvalidUrl(_) => "the webhook's uri is not a usable http(s) URL".to_owned(),
        HttpError::Blocked(why) => format!("refused by the SSRF guard: {why}"),
        HttpError::Connect(why) => format!("could not connect: {why}"),
        HttpError::TimedOut => "timed out".to_owned(),
        HttpError::Other(why) => why.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let options = DeliveryOptions {
            retry_base: Duration::from_secs(5),
            retry_max: Duration::from_secs(60),
            ..Default::default()
        };
        let waits: Vec<u64> = (1..=6).map(|a| options.backoff(a).as_secs()).collect();
        assert_eq!(waits, [5, 10, 20, 40, 60, 60]);
        assert_eq!(options.backoff(u32::MAX), Duration::from_secs(60));
    }
}
