package dev.hookbox.conformance;

import static dev.hookbox.conformance.Sdk.CLIENT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.google.genai.gaos.models.interactions.Interaction;
import com.google.genai.gaos.models.webhooks.RevocationBehavior;
import com.google.genai.gaos.models.webhooks.RotateSigningSecretRequest;
import com.google.genai.gaos.models.webhooks.Webhook;
import com.google.genai.gaos.models.webhooks.WebhookInput;
import com.google.genai.gaos.models.webhooks.WebhookListResponse;
import com.google.genai.gaos.models.webhooks.WebhookRotateSigningSecretResponse;
import com.google.genai.gaos.models.webhooks.WebhookSubscribedEvent;
import com.google.genai.gaos.models.webhooks.WebhookUpdate;
import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.junit.jupiter.api.Test;

/**
 * Webhooks through the Java SDK, delivered to a receiver on 127.0.0.1 (run.sh admits it with
 * --egress-allow-cidr) that checks every signature the Standard Webhooks way.
 */
class WebhooksTest {
    record Delivery(Map<String, List<String>> headers, byte[] body) {
        String header(String name) {
            return headers.entrySet().stream().filter(e -> e.getKey().equalsIgnoreCase(name))
                    .map(e -> e.getValue().get(0)).findFirst().orElse("");
        }

        JsonNode json() {
            return Hookbox.parse(body);
        }
    }

    static final class Receiver implements AutoCloseable {
        final HttpServer server;
        final List<Delivery> seen = new ArrayList<>();

        Receiver() throws java.io.IOException {
            server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 16);
            server.createContext("/hook", ex -> {
                byte[] body = ex.getRequestBody().readAllBytes();
                synchronized (this) {
                    seen.add(new Delivery(Map.copyOf(ex.getRequestHeaders()), body));
                    notifyAll();
                }
                ex.sendResponseHeaders(204, -1);
                ex.close();
            });
            server.start();
        }

        String url() {
            return "http://127.0.0.1:" + server.getAddress().getPort() + "/hook";
        }

        /** The first delivery for which {@code p} holds, waiting for it (60 s at most). */
        synchronized Delivery await(Predicate<Delivery> p) throws InterruptedException {
            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            while (true) {
                for (Delivery d : seen) {
                    if (p.test(d)) {
                        return d;
                    }
                }
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new AssertionError("no such delivery; saw " + seen.size());
                }
                wait(Math.max(1, left / 1_000_000));
            }
        }

        @Override
        public void close() {
            server.stop(0);
        }
    }

    /** Standard Webhooks: v1 = base64(HMAC-SHA256(secret, id "." timestamp "." body)). */
    static boolean verifies(String secret, Delivery d) throws Exception {
        byte[] key = Base64.getDecoder().decode(secret.startsWith("whsec_") ? secret.substring(6) : secret);
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(key, "HmacSHA256"));
        mac.update((d.header("webhook-id") + "." + d.header("webhook-timestamp") + ".").getBytes(StandardCharsets.UTF_8));
        byte[] expected = mac.doFinal(d.body());
        for (String sig : d.header("webhook-signature").split(" ")) {
            if (sig.startsWith("v1,") && MessageDigest.isEqual(expected, Base64.getDecoder().decode(sig.substring(3)))) {
                return true;
            }
        }
        return false;
    }

    @Test
    void createPingDeliverRotateUpdateDelete() throws Exception {
        try (Receiver receiver = new Receiver()) {
            Webhook hook = Hookbox.wire("POST", "/v1beta/webhooks", () -> CLIENT.webhooks.create(WebhookInput.builder()
                    .name("java").uri(receiver.url())
                    .subscribedEvents(List.of(WebhookSubscribedEvent.INTERACTION_COMPLETED)).build()).webhook().orElseThrow());
            String id = hook.id().orElseThrow();
            String secret = hook.newSigningSecret().orElseThrow();
            assertEquals("enabled", hook.state().orElseThrow().value());

            Webhook got = Hookbox.wire("GET", "/v1beta/webhooks/" + id, () -> CLIENT.webhooks.get(id).webhook().orElseThrow());
            assertTrue(got.newSigningSecret().isEmpty(), "the secret is shown once");
            assertFalse(got.signingSecrets().orElseThrow().get(0).truncatedSecret().orElse("").equals(secret));
            WebhookListResponse listed = Hookbox.wire("GET", "/v1beta/webhooks",
                    () -> CLIENT.webhooks.listDirect().webhookListResponse().orElseThrow());
            assertTrue(listed.webhooks().orElse(List.of()).stream().anyMatch(w -> w.id().equals(hook.id())));

            Hookbox.wire("POST", "/v1beta/webhooks/" + id, () -> CLIENT.webhooks.ping(id).webhookPingResponse().orElseThrow());
            Delivery ping = receiver.await(d -> d.json().path("type").asText().equals("webhook.ping"));
            assertTrue(verifies(secret, ping), "the ping is signed with the secret from create");

            Interaction i = Sdk.create(Sdk.agent().input(Sdk.text("run `echo hooked`")).build());
            Delivery done = receiver.await(d -> d.json().path("type").asText().equals("interaction.completed")
                    && d.json().toString().contains(i.id().orElseThrow()));
            assertTrue(verifies(secret, done));
            assertEquals(done.header("webhook-id"), done.json().path("id").asText());

            WebhookRotateSigningSecretResponse rotated = Hookbox.wire("POST", "/v1beta/webhooks/" + id,
                    () -> CLIENT.webhooks.rotateSigningSecret(id, RotateSigningSecretRequest.builder()
                            .revocationBehavior(RevocationBehavior.REVOKE_PREVIOUS_SECRETS_AFTER_H24).build())
                            .webhookRotateSigningSecretResponse().orElseThrow());
            String newer = rotated.secret().orElseThrow();
            Webhook afterRotation = Hookbox.wire("GET", "/v1beta/webhooks/" + id, () -> CLIENT.webhooks.get(id).webhook().orElseThrow());
            assertEquals(2, afterRotation.signingSecrets().orElseThrow().size());
            assertTrue(afterRotation.signingSecrets().orElseThrow().stream().anyMatch(s -> s.expireTime().isPresent()),
                    "the old secret's expire_time parses as a timestamp");
            int before = receiver.seen.size();
            CLIENT.webhooks.ping(id);
            Delivery second = receiver.await(d -> receiver.seen.indexOf(d) >= before && d.json().path("type").asText().equals("webhook.ping"));
            assertTrue(verifies(newer, second) && verifies(secret, second), "during the overlap both secrets verify");

            Webhook updated = Hookbox.wire("PATCH", "/v1beta/webhooks/" + id, () -> CLIENT.webhooks.update(id,
                    WebhookUpdate.builder().name("renamed").build()).webhook().orElseThrow());
            assertEquals("renamed", updated.name().orElse(""));
            assertNotNull(updated.updateTime().orElse(null));

            CLIENT.webhooks.delete(id);
            RuntimeException gone = assertThrows(RuntimeException.class, () -> CLIENT.webhooks.get(id));
            assertTrue(gone.toString().contains("404"), gone.toString());
        }
    }
}
