package dev.hookbox.conformance;

import static dev.hookbox.conformance.Sdk.CLIENT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.genai.gaos.models.interactions.InteractionSSEStreamEvent;
import com.google.genai.gaos.models.operations.GetInteractionByIdRequest;
import com.google.genai.gaos.models.triggers.ListTriggerExecutionsResponse;
import com.google.genai.gaos.models.triggers.ListTriggersResponse;
import com.google.genai.gaos.models.triggers.Trigger;
import com.google.genai.gaos.models.triggers.TriggerCreateParams;
import com.google.genai.gaos.models.triggers.TriggerExecution;
import com.google.genai.gaos.models.triggers.TriggerUpdate;
import com.google.genai.gaos.models.triggers.TriggerUpdateStatus;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Triggers through the Java SDK: create, get, list, run now, executions, pause and resume, delete. */
class TriggersTest {

    @Test
    void createRunPauseResumeDelete() {
        Trigger t = Hookbox.wire("POST", "/v1beta/triggers", () -> CLIENT.triggers.create(TriggerCreateParams.builder()
                .interaction(Sdk.agent().input(Sdk.text("run `echo nightly`")).build())
                .schedule("0 2 * * *").timeZone("Europe/Berlin").displayName("nightly")
                .maxConsecutiveFailures(3).executionTimeoutSeconds(600).build()).trigger().orElseThrow());
        String id = t.id().orElseThrow();
        assertEquals("active", t.status().orElseThrow().value());
        assertTrue(t.nextRunTime().isPresent(), "next_run_time parses as a timestamp");
        assertEquals("Europe/Berlin", t.timeZone().orElse(""));

        Trigger got = Hookbox.wire("GET", "/v1beta/triggers/" + id, () -> CLIENT.triggers.get(id).trigger().orElseThrow());
        assertEquals(t.nextRunTime(), got.nextRunTime());
        ListTriggersResponse listed = Hookbox.wire("GET", "/v1beta/triggers",
                () -> CLIENT.triggers.listDirect().listTriggersResponse().orElseThrow());
        assertTrue(listed.triggers().orElse(List.of()).stream().anyMatch(x -> x.id().equals(t.id())));

        TriggerExecution run = Hookbox.wire("POST", "/v1beta/triggers/" + id,
                () -> CLIENT.triggers.run(id).triggerExecution().orElseThrow());
        String interaction = run.interactionId().orElseThrow();
        // The interaction's stream ends when it does: wait on that, not on a clock.
        try (var events = CLIENT.interactions.get(GetInteractionByIdRequest.builder().id(interaction).stream(true).build()).events()) {
            List<InteractionSSEStreamEvent> all = events.toList();
            assertTrue(!all.isEmpty());
        } catch (java.io.IOException e) {
            throw new AssertionError(e);
        }
        assertTrue(Sdk.get(interaction).outputText().orElse("").contains("nightly"));
        ListTriggerExecutionsResponse executions = Hookbox.wire("GET", "/v1beta/triggers/" + id,
                () -> CLIENT.triggers.listExecutions(id).listTriggerExecutionsResponse().orElseThrow());
        TriggerExecution done = executions.triggerExecutions().orElseThrow().stream()
                .filter(x -> x.id().equals(run.id())).findFirst().orElseThrow();
        assertEquals("completed", done.status().orElseThrow().value());
        assertEquals(run.interactionId(), done.interactionId());
        assertTrue(done.endTime().isPresent(), "end_time parses as a timestamp");

        Trigger paused = Hookbox.wire("PATCH", "/v1beta/triggers/" + id, () -> CLIENT.triggers.update(id,
                TriggerUpdate.builder().status(TriggerUpdateStatus.PAUSED).build()).trigger().orElseThrow());
        assertEquals("paused", paused.status().orElseThrow().value());
        assertTrue(paused.lastPauseTime().isPresent());
        Trigger resumed = Hookbox.wire("PATCH", "/v1beta/triggers/" + id, () -> CLIENT.triggers.update(id,
                TriggerUpdate.builder().status(TriggerUpdateStatus.ACTIVE).build()).trigger().orElseThrow());
        assertEquals("active", resumed.status().orElseThrow().value());

        CLIENT.triggers.delete(id);
        RuntimeException gone = assertThrows(RuntimeException.class, () -> CLIENT.triggers.get(id));
        assertTrue(gone.toString().contains("404"), gone.toString());
    }
}
