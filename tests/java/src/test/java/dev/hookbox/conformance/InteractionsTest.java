package dev.hookbox.conformance;

import static dev.hookbox.conformance.Sdk.CLIENT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.google.genai.gaos.models.errors.GaosClientException;
import com.google.genai.gaos.models.interactions.CodeExecutionResultStep;
import com.google.genai.gaos.models.interactions.CreateAgentInteractionEnvironment;
import com.google.genai.gaos.models.interactions.Interaction;
import com.google.genai.gaos.models.interactions.InteractionCompletedEvent;
import com.google.genai.gaos.models.interactions.InteractionCreatedEvent;
import com.google.genai.gaos.models.interactions.InteractionSSEEvent;
import com.google.genai.gaos.models.interactions.InteractionSSEStreamEvent;
import com.google.genai.gaos.models.interactions.StepDelta;
import com.google.genai.gaos.models.interactions.TextDelta;
import com.google.genai.gaos.models.operations.CreateInteractionRequestBody;
import com.google.genai.gaos.models.operations.GetInteractionByIdRequest;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** Interactions through the Java SDK: create, get, streaming (live, replay, resume), background, cancel, delete, errors. */
class InteractionsTest {

    @Test
    void httpOptionsBaseUrlReachesTheInteractionsClient() throws Exception {
        // Hookbox.client() sets the base URL only through HttpOptions; the request must arrive
        // at that URL (the recording proxy), not at Google.
        RecordingProxy p = Hookbox.proxy();
        int mark = p.mark();
        Interaction i = Sdk.create(Sdk.agent().input(Sdk.text("run `echo via-http-options`")).build());
        RecordingProxy.Exchange e = p.after(mark, "POST", "/v1beta/interactions");
        assertEquals(200, e.status());
        assertTrue(i.outputText().orElse("").contains("via-http-options"), i.toString());
    }

    @Test
    void createGetAndContinueInTheSameEnvironment() {
        Interaction first = Sdk.create(Sdk.agent()
                .input(Sdk.text("Read `/workspace/notes.txt`."))
                .environment(CreateAgentInteractionEnvironment.of(Sdk.env(
                        Sdk.inline("workspace/notes.txt", "alpha beta"),
                        Sdk.inline("workspace/data.bin", "aGk=").withEncoding("base64"))))
                .build());
        assertEquals("completed", Sdk.status(first));
        assertTrue(first.outputText().orElse("").contains("alpha beta"), first.toString());
        String env = first.environmentId().orElseThrow();
        assertTrue(env.startsWith("env_"), env);
        assertTrue(first.created().isPresent() && first.updated().isPresent(), first.toString());

        Interaction second = Sdk.create(Sdk.agent()
                .input(Sdk.text("Run `cat /workspace/data.bin` please."))
                .environment(CreateAgentInteractionEnvironment.of(env))
                .previousInteractionId(first.id().orElseThrow())
                .build());
        assertEquals(env, second.environmentId().orElse(""));
        assertEquals(first.id(), second.previousInteractionId());
        assertTrue(second.outputText().orElse("").endsWith("hi"), second.toString());

        Interaction got = Sdk.get(first.id().orElseThrow());
        assertEquals(first.outputText(), got.outputText());
        assertEquals(first.steps().map(List::size), got.steps().map(List::size));
    }

    @Test
    void streamingLiveReplayAndResume() throws Exception {
        RecordingProxy p = Hookbox.proxy();
        int mark = p.mark();
        List<InteractionSSEStreamEvent> live;
        try (var events = CLIENT.interactions.create(CreateInteractionRequestBody.of(Sdk.agent()
                .input(Sdk.text("run `echo streamed`")).stream(true).build()), true).events()) {
            live = events.toList();
        }
        List<JsonNode> sent = Hookbox.sseData(p.after(mark, "POST", "/v1beta/interactions").text());
        assertEquals(sent.size(), live.size(), "every event the server sent is one SDK event");
        for (int k = 0; k < sent.size(); k++) {
            InteractionSSEEvent ev = live.get(k).data().orElseThrow();
            Hookbox.assertNothingLost("event " + k, ev, sent.get(k), Hookbox.javaDrops(sent.get(k)), Set.of());
        }
        InteractionSSEEvent first = live.get(0).data().orElseThrow();
        InteractionSSEEvent last = live.get(live.size() - 1).data().orElseThrow();
        assertInstanceOf(InteractionCreatedEvent.class, first);
        assertInstanceOf(InteractionCompletedEvent.class, last);
        String text = live.stream().map(e -> e.data().orElseThrow())
                .filter(e -> e instanceof StepDelta).map(e -> ((StepDelta) e).delta().orElse(null))
                .filter(d -> d instanceof TextDelta).map(d -> ((TextDelta) d).text().orElse(""))
                .reduce("", String::concat);
        assertTrue(text.contains("streamed"), text);

        // Replay from the store: the main sequence again (running-output pieces, whose
        // event_id is "<start>.<offset>", are live only).
        String id = ((InteractionCreatedEvent) first).interaction().orElseThrow().id().orElseThrow();
        List<String> mainIds = sent.stream().map(e -> e.path("event_id").asText())
                .filter(e -> !e.contains(".")).toList();
        mark = p.mark();
        List<InteractionSSEStreamEvent> replayed;
        try (var events = CLIENT.interactions.get(GetInteractionByIdRequest.builder().id(id).stream(true).build()).events()) {
            replayed = events.toList();
        }
        List<JsonNode> replayedWire = Hookbox.sseData(p.after(mark, "GET", "/v1beta/interactions/" + id).text());
        assertEquals(mainIds, replayedWire.stream().map(e -> e.path("event_id").asText()).toList());
        assertEquals(replayedWire.size(), replayed.size());
        for (int k = 0; k < replayed.size(); k++) {
            Hookbox.assertNothingLost("replayed " + k, replayed.get(k).data().orElseThrow(), replayedWire.get(k),
                    Hookbox.javaDrops(replayedWire.get(k)), Set.of());
        }
        List<InteractionSSEStreamEvent> resumed;
        try (var events = CLIENT.interactions.get(GetInteractionByIdRequest.builder().id(id).stream(true)
                .lastEventId(mainIds.get(2)).build()).events()) {
            resumed = events.toList();
        }
        assertEquals(mainIds.size() - 3, resumed.size(), "resumed after the third event");
    }

    @Test
    void backgroundCancelDelete() {
        Interaction bg = Sdk.create(Sdk.agent().input(Sdk.text("run `sleep 600`")).background(true).build());
        assertTrue(Set.of("in_progress", "queued").contains(Sdk.status(bg)), Sdk.status(bg));
        String id = bg.id().orElseThrow();
        Interaction cancelled = Hookbox.wire("POST", "/v1beta/interactions/" + id + "/cancel",
                () -> CLIENT.interactions.cancel(id).interaction().orElseThrow());
        assertEquals("cancelled", Sdk.status(cancelled));
        CLIENT.interactions.delete(id);
        GaosClientException gone = assertThrows(GaosClientException.class, () -> Sdk.get(id));
        assertEquals(404, gone.code());
    }

    @Test
    void errorsCarryStatusAndMessage() {
        GaosClientException unknownAgent = assertThrows(GaosClientException.class, () -> CLIENT.interactions.create(
                CreateInteractionRequestBody.of(Sdk.agent().agent("no-such-agent").input(Sdk.text("x")).build())));
        assertEquals(400, unknownAgent.code());
        assertTrue(unknownAgent.bodyAsString().orElse("").contains("Unknown agent"), unknownAgent.bodyAsString().orElse(""));
        JsonNode body = Hookbox.parse(unknownAgent.bodyAsString().orElseThrow());
        assertEquals(400, body.path("error").path("code").asInt());
        assertEquals("INVALID_ARGUMENT", body.path("error").path("status").asText());

        GaosClientException missing = assertThrows(GaosClientException.class, () -> CLIENT.interactions.create(
                CreateInteractionRequestBody.of(Sdk.agent().input(Sdk.text("x"))
                        .environment(CreateAgentInteractionEnvironment.of("env_missing")).build())));
        assertEquals(404, missing.code());
        assertTrue(missing.bodyAsString().orElse("").contains("env_missing"));

        var wrongKey = Hookbox.clientFor(Hookbox.proxy().url(), "wrong-key");
        GaosClientException denied = assertThrows(GaosClientException.class,
                () -> wrongKey.interactions.get(GetInteractionByIdRequest.builder().id("int_x").build()));
        assertEquals(401, denied.code());
        assertTrue(denied.bodyAsString().orElse("").contains("API key"), denied.bodyAsString().orElse(""));
    }

    @Test
    void aDeniedCallIsAnErrorResultCarryingTheReason() {
        String hooks = "{\"gate\": {\"pre_tool_execution\": [{\"matcher\": \"code_execution\", \"hooks\": [{\"type\": \"command\","
                + " \"command\": \"cat >/dev/null; echo '{\\\"decision\\\": \\\"deny\\\", \\\"reason\\\": \\\"no shells today\\\"}'\"}]}]}}";
        Interaction i = Sdk.create(Sdk.agent().input(Sdk.text("run `id`"))
                .environment(CreateAgentInteractionEnvironment.of(Sdk.env(Sdk.inline(".agents/hooks.json", hooks))))
                .build());
        List<CodeExecutionResultStep> results = Sdk.steps(i, CodeExecutionResultStep.class);
        assertEquals(1, results.size(), i.toString());
        assertEquals(true, results.get(0).isError().orElse(false));
        assertEquals("no shells today", results.get(0).result().orElseThrow().string().orElse(""));
        assertNotEquals(-1, i.outputText().orElse("").indexOf("no shells today"));
    }
}
