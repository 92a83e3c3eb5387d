package dev.hookbox.conformance;

import static dev.hookbox.conformance.Sdk.CLIENT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.genai.gaos.models.agents.Agent;
import com.google.genai.gaos.models.agents.AgentConfig;
import com.google.genai.gaos.models.agents.AgentListResponse;
import com.google.genai.gaos.models.agents.BaseEnvironment;
import com.google.genai.gaos.models.interactions.AgentOption;
import com.google.genai.gaos.models.interactions.AntigravityAgentConfig;
import com.google.genai.gaos.models.interactions.CodeExecution;
import com.google.genai.gaos.models.interactions.Interaction;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Agents through the Java SDK: create (with a base environment and config), get, list, use, delete. */
class AgentsTest {

    @Test
    void createGetListUseDelete() {
        Agent created = Hookbox.wire("POST", "/v1beta/agents", () -> CLIENT.agents.create(Agent.builder()
                .id("java_agent").baseAgent(Hookbox.AGENT).description("an agent made in Java")
                .systemInstruction("be brief")
                .agentConfig(AgentConfig.of(AntigravityAgentConfig.builder().build()))
                .baseEnvironment(BaseEnvironment.of(Sdk.env(Sdk.inline("workspace/base.txt", "from the base environment"))))
                .tools(List.of(new CodeExecution()))
                .build()).agent().orElseThrow());
        assertEquals("java_agent", created.id().orElse(""));
        Agent got = Hookbox.wire("GET", "/v1beta/agents/java_agent", () -> CLIENT.agents.get("java_agent").agent().orElseThrow());
        assertEquals("an agent made in Java", got.description().orElse(""));
        AgentListResponse listed = Hookbox.wire("GET", "/v1beta/agents",
                () -> CLIENT.agents.listDirect().agentListResponse().orElseThrow());
        assertTrue(listed.agents().orElse(List.of()).stream().anyMatch(a -> a.id().orElse("").equals("java_agent")));

        Interaction via = Sdk.create(Sdk.agent().agent(AgentOption.of("java_agent"))
                .input(Sdk.text("Read `/workspace/base.txt`.")).build());
        assertTrue(via.outputText().orElse("").contains("from the base environment"), via.toString());

        CLIENT.agents.delete("java_agent");
        RuntimeException gone = assertThrows(RuntimeException.class, () -> CLIENT.agents.get("java_agent"));
        assertTrue(gone.toString().contains("404"), gone.toString());
    }
}
