package dev.hookbox.conformance;

import com.google.genai.Client;
import com.google.genai.gaos.models.interactions.AgentOption;
import com.google.genai.gaos.models.interactions.CreateAgentInteraction;
import com.google.genai.gaos.models.interactions.Environment;
import com.google.genai.gaos.models.interactions.FunctionCallStep;
import com.google.genai.gaos.models.interactions.Interaction;
import com.google.genai.gaos.models.interactions.InteractionsInput;
import com.google.genai.gaos.models.interactions.Source;
import com.google.genai.gaos.models.interactions.SourceType;
import com.google.genai.gaos.models.interactions.Step;
import com.google.genai.gaos.models.operations.CreateInteractionRequestBody;
import com.google.genai.gaos.models.operations.GetInteractionByIdRequest;
import java.util.ArrayList;
import java.util.List;

/** Short forms of the SDK calls the tests make most, each checked against the wire. */
final class Sdk {
    static final Client CLIENT = Hookbox.client();

    private Sdk() {}

    static CreateAgentInteraction.Builder agent() {
        return CreateAgentInteraction.builder().agent(AgentOption.of(Hookbox.AGENT));
    }

    static InteractionsInput text(String input) {
        return InteractionsInput.of(input);
    }

    /** interactions.create (blocking), the answer checked against the wire. */
    static Interaction create(CreateAgentInteraction params) {
        return Hookbox.wire("POST", "/v1beta/interactions",
                () -> CLIENT.interactions.create(CreateInteractionRequestBody.of(params)).interaction().orElseThrow());
    }

    /** interactions.get, the answer checked against the wire. */
    static Interaction get(String id) {
        return Hookbox.wire("GET", "/v1beta/interactions/" + id,
                () -> CLIENT.interactions.get(GetInteractionByIdRequest.builder().id(id).build()).interaction().orElseThrow());
    }

    static Source inline(String target, String content) {
        return Source.builder().type(SourceType.INLINE).target(target).content(content).build();
    }

    static Environment env(Source... sources) {
        return Environment.builder().sources(List.of(sources)).build();
    }

    static List<Step> steps(Interaction i) {
        return i.steps().orElse(List.of());
    }

    static <T extends Step> List<T> steps(Interaction i, Class<T> type) {
        List<T> out = new ArrayList<>();
        for (Step s : steps(i)) {
            if (type.isInstance(s)) {
                out.add(type.cast(s));
            }
        }
        return out;
    }

    static FunctionCallStep call(Interaction i, String name) {
        return steps(i, FunctionCallStep.class).stream()
                .filter(c -> c.name().orElse("").equals(name))
                .findFirst()
                .orElseThrow(() -> new AssertionError("no " + name + " call in " + i));
    }

    static String status(Interaction i) {
        return i.status().map(s -> s.value()).orElse("");
    }
}
