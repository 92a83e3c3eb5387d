package dev.hookbox.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.genai.gaos.models.errors.GaosClientException;
import com.google.genai.gaos.models.interactions.CreateAgentInteractionEnvironment;
import com.google.genai.gaos.models.interactions.Function;
import com.google.genai.gaos.models.interactions.FunctionCallStep;
import com.google.genai.gaos.models.interactions.FunctionResultStep;
import com.google.genai.gaos.models.interactions.FunctionResultStepResultUnion;
import com.google.genai.gaos.models.interactions.Interaction;
import com.google.genai.gaos.models.interactions.InteractionsInput;
import com.google.genai.gaos.models.interactions.Step;
import com.google.genai.gaos.models.interactions.Tool;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Client functions and approvals (a hook answering "ask"), answered through the Java SDK's own types. */
class FunctionToolsTest {
    static final String APPROVAL = "hookbox_approval";

    static Tool weather() {
        return Function.builder().name("get_weather").description("The weather in a city.")
                .parameters(Map.of("type", "object", "properties", Map.of("city", Map.of("type", "string")),
                        "required", List.of("city")))
                .build();
    }

    static Step result(String callId, String name, String text) {
        return FunctionResultStep.builder().callId(callId).name(name).result(FunctionResultStepResultUnion.of(text)).build();
    }

    @Test
    void aFunctionCallRoundTrip() {
        Interaction asked = Sdk.create(Sdk.agent().tools(List.of(weather()))
                .input(Sdk.text("call `get_weather` with `{\"city\": \"Berlin\"}`")).build());
        assertEquals("requires_action", Sdk.status(asked));
        FunctionCallStep call = Sdk.call(asked, "get_weather");
        assertEquals(Map.of("city", "Berlin"), call.arguments().orElseThrow());
        assertTrue(Sdk.steps(asked, FunctionResultStep.class).isEmpty(), "the client runs it");

        GaosClientException unknown = assertThrows(GaosClientException.class, () -> Sdk.create(Sdk.agent()
                .previousInteractionId(asked.id().orElseThrow()).tools(List.of(weather()))
                .input(InteractionsInput.ofStep(List.of(result("call_nope", "get_weather", "x")))).build()));
        assertEquals(400, unknown.code());
        assertTrue(unknown.bodyAsString().orElse("").contains("call_nope"));

        Interaction done = Sdk.create(Sdk.agent()
                .previousInteractionId(asked.id().orElseThrow()).tools(List.of(weather()))
                .input(InteractionsInput.ofStep(List.of(result(call.id().orElseThrow(), "get_weather", "sunny, 21 °C"))))
                .build());
        assertEquals("completed", Sdk.status(done));
        assertTrue(done.outputText().orElse("").contains("sunny, 21 °C"), done.toString());
        assertEquals(asked.environmentId(), done.environmentId());
    }

    static final String HOOKS = "{\"review\": {\"pre_tool_execution\": [{\"matcher\": \"code_execution\", \"hooks\": ["
            + "{\"type\": \"command\", \"command\": \"python3 /.agents/ask.py\", \"timeout\": 30}]}]}}";
    static final String ASK = "import json, sys\n"
            + "call = json.load(sys.stdin)[\"tool_call\"]\n"
            + "if \"deploy\" in call[\"args\"].get(\"code\", \"\"):\n"
            + "    print(json.dumps({\"decision\": \"ask\", \"reason\": \"deploys need a person\"}))\n"
            + "else:\n"
            + "    print(json.dumps({\"decision\": \"allow\"}))\n";

    Interaction pause() {
        Interaction paused = Sdk.create(Sdk.agent()
                .environment(CreateAgentInteractionEnvironment.of(Sdk.env(
                        Sdk.inline(".agents/hooks.json", HOOKS), Sdk.inline(".agents/ask.py", ASK))))
                .input(Sdk.text("Run `echo shipped > /workspace/deploy.txt` to deploy.")).build());
        assertEquals("requires_action", Sdk.status(paused), paused.toString());
        FunctionCallStep req = Sdk.call(paused, APPROVAL);
        Map<String, Object> args = req.arguments().orElseThrow();
        assertEquals("code_execution", args.get("tool"));
        assertEquals("deploys need a person", args.get("reason"));
        assertTrue(String.valueOf(args.get("args")).contains("deploy.txt"), args.toString());
        assertTrue(args.get("expires_at") instanceof String, args.toString());
        return paused;
    }

    Interaction answer(Interaction paused, String json) {
        FunctionCallStep req = Sdk.call(paused, APPROVAL);
        // The Java SDK cannot send an object result (FunctionResultStepResult has no fields), so
        // the answer goes as JSON text, which hookbox reads like the object.
        return Sdk.create(Sdk.agent().previousInteractionId(paused.id().orElseThrow())
                .input(InteractionsInput.ofStep(List.of(result(req.id().orElseThrow(), APPROVAL, json)))).build());
    }

    boolean exists(String env, String path) {
        try {
            Sdk.CLIENT.environments.files().download(env, path);
            return true;
        } catch (RuntimeException e) {
            return false;
        }
    }

    @Test
    void anApprovalAnsweredYesRunsTheCall() {
        Interaction paused = pause();
        String env = paused.environmentId().orElseThrow();
        assertFalse(exists(env, "workspace/deploy.txt"), "nothing ran before the answer");

        GaosClientException bad = assertThrows(GaosClientException.class, () -> answer(paused, "yes please"));
        assertEquals(400, bad.code());
        assertTrue(bad.bodyAsString().orElse("").contains("approved"), bad.bodyAsString().orElse(""));

        Interaction done = answer(paused, "{\"approved\": true}");
        assertEquals("completed", Sdk.status(done), done.toString());
        assertTrue(exists(env, "workspace/deploy.txt"), "the approved call ran");
        assertEquals("shipped\n", new String(Sdk.CLIENT.environments.files().download(env, "workspace/deploy.txt")));
    }

    @Test
    void anApprovalAnsweredNoTellsTheModelWhy() {
        Interaction paused = pause();
        Interaction done = answer(paused, "{\"approved\": false, \"reason\": \"not on Fridays\"}");
        assertEquals("completed", Sdk.status(done));
        assertTrue(done.outputText().orElse("").contains("Denied by a reviewer: not on Fridays"), done.toString());
        assertFalse(exists(paused.environmentId().orElseThrow(), "workspace/deploy.txt"));
        assertNotEquals(paused.id(), done.id());
    }
}
