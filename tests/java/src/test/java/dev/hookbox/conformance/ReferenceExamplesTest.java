package dev.hookbox.conformance;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.genai.gaos.models.interactions.CodeExecutionResultStep;
import com.google.genai.gaos.models.interactions.CreateAgentInteractionEnvironment;
import com.google.genai.gaos.models.interactions.FunctionResultStep;
import com.google.genai.gaos.models.interactions.Interaction;
import com.google.genai.gaos.models.operations.GetEnvironmentFilesRequest;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The reference documentation's Java examples, run unmodified from their verbatim copies in
 * tests/java/reference/ (their {@code new Client()} reads GOOGLE_GEMINI_BASE_URL and
 * GEMINI_API_KEY, which run.sh points at hookbox). {@link #theCopiesAreVerbatimFromTheReference}
 * holds the copies to the reference text when that is beside the checkout.
 */
class ReferenceExamplesTest {
    static final String RM_REASON = "Destructive command blocked by security gate.";
    static final String SUMMARY = "{\"department\": \"Engineering\", \"team_size\": 42, \"status\": \"active\"}";

    @TempDir
    Path work;

    static final String SOURCE = "verbatim from\n// shared/reference/000_4a40fa512f86aa3a.txt";

    /** The examples' code, from the copies (their headers name the source). */
    static List<String> examples() throws Exception {
        List<ReferenceExamples.Copy> copies = ReferenceExamples.copies();
        assertEquals(3, copies.size(), "the reference has three Java examples");
        for (ReferenceExamples.Copy c : copies) {
            assertTrue(c.header().contains(SOURCE), c.file() + " names its source: " + c.header());
            // What runs is what the reference shows: the client is the reference's own.
            assertTrue(c.code().contains("Client client = new Client();"), c.file());
        }
        return copies.stream().map(ReferenceExamples.Copy::code).toList();
    }

    /** What `hooks check` says about an environment's hooks files (GET …/environments/{id}/hooks). */
    static String hooksReport(String env) {
        return Hookbox.getJson("/v1beta/environments/" + env + "/hooks").toString();
    }

    @Test
    void securityGateDeniesRmRfAndTheModelSeesTheReason() throws Exception {
        ReferenceExamples.Run run = ReferenceExamples.run("SecurityGate", examples().get(0), List.of("interaction"), work);
        Interaction interaction = run.get("interaction");
        assertTrue(interaction.outputText().orElse("").contains(RM_REASON), interaction.toString());
        assertTrue(run.stdout().contains(RM_REASON), "the example printed the reason: " + run.stdout());
        List<CodeExecutionResultStep> results = Sdk.steps(interaction, CodeExecutionResultStep.class);
        assertEquals(1, results.size(), interaction.toString());
        assertEquals(true, results.get(0).isError().orElse(false));
        assertEquals(RM_REASON, results.get(0).result().orElseThrow().string().orElse(""));

        // The reference promises the command does not run: give it something to destroy.
        String env = interaction.environmentId().orElseThrow();
        Sdk.CLIENT.environments.files().upload(env, "tmp/forbidden/keep.txt", "keep".getBytes(StandardCharsets.UTF_8));
        Interaction again = Sdk.create(Sdk.agent().input(Sdk.text("Run `rm -rf /tmp/forbidden` using code_execution."))
                .environment(CreateAgentInteractionEnvironment.of(env)).build());
        assertTrue(again.outputText().orElse("").contains(RM_REASON), again.toString());
        List<String> left = Sdk.CLIENT.environments.files().list(GetEnvironmentFilesRequest.builder()
                .environment(env).path("tmp/forbidden").recursive(true).build())
                .getEnvironmentFilesResponse().orElseThrow().files().orElse(List.of()).stream()
                .map(f -> f.path().orElse("")).toList();
        assertEquals(List.of("/tmp/forbidden/keep.txt"), left);
    }

    /**
     * The reference's second example (multi-turn with previous_interaction_id). Its Java version
     * names the matcher {@code read_file}, a tool that does not exist (the Python, JavaScript and
     * REST versions say {@code view_file}); matched against the whole tool name, as the reference
     * says, it matches nothing, so the gate does not fire. hooks check flags the matcher.
     */
    @Test
    void privacyGateMultiTurnContinuesInTheSameEnvironment() throws Exception {
        ReferenceExamples.Run run = ReferenceExamples.run("PrivacyGate", examples().get(1), List.of("int1", "int2"), work);
        Interaction int1 = run.get("int1");
        Interaction int2 = run.get("int2");
        String env = int1.environmentId().orElseThrow();
        assertEquals(int1.environmentId(), int2.environmentId(), "the second turn runs in the same environment");
        assertEquals(int1.id(), int2.previousInteractionId(), "and continues the first");
        assertTrue(int2.outputText().orElse("").contains(SUMMARY), int2.toString());
        assertTrue(run.stdout().contains(SUMMARY), run.stdout());

        String report = hooksReport(env);
        assertTrue(report.contains("read_file") && report.contains("view_file"),
                "hooks check names the matcher and the tool it probably meant: " + report);
        // So the view_file call ran (its result is no error): exactly what the reference's
        // matcher rules say for a matcher that names no tool.
        List<FunctionResultStep> reads = Sdk.steps(int1, FunctionResultStep.class);
        assertEquals(1, reads.size(), int1.toString());
        assertFalse(reads.get(0).isError().orElse(false), int1.toString());
    }

    /**
     * The reference's third Java example does not compile against the SDK: it calls
     * {@code Allowlist.builder()} and {@code EnvironmentNetworkEgressAllowlist.of(…)}, which the
     * SDK does not have ({@code Allowlist} is a union made with {@code Allowlist.of(List)}, and
     * {@code EnvironmentNetworkEgressAllowlist} has a builder). If a release makes it compile,
     * this fails: then run it here like the other two.
     */
    @Test
    void auditTelemetryDoesNotCompileAgainstThisSdk() throws Exception {
        AssertionError e = assertThrows(AssertionError.class,
                () -> ReferenceExamples.run("AuditTelemetry", examples().get(2), List.of("interaction"), work));
        String errors = e.getMessage().substring(0, e.getMessage().indexOf("--- generated source ---"));
        assertTrue(errors.contains("does not compile"), errors);
        for (String line : errors.split("\n")) {
            if (line.startsWith("line ")) {
                assertTrue(line.contains("builder()") && line.contains("Allowlist")
                        || line.contains("of(") && line.contains("EnvironmentNetworkEgressAllowlist"),
                        "an unexpected compile error: " + line + "\n" + errors);
            }
        }
    }

    /**
     * Each copy's code (all of it below the header) is exactly the example the reference text
     * shows, and there is a copy for every Java example it has. Not run, and reported so, when the
     * reference text is not beside the checkout (a clean CI checkout): the copies still run.
     */
    @Test
    void theCopiesAreVerbatimFromTheReference() throws Exception {
        Path doc = ReferenceExamples.referenceDoc();
        String missing = doc == null ? "HOOKBOX_REFERENCE_DOC is not set"
                : Files.isRegularFile(doc) ? null : "the reference text is not at " + doc;
        if (missing != null) {
            String why = "NOT RUN: the copies in tests/java/reference/ were not compared with the reference text: " + missing;
            System.err.println(why);
            Assumptions.abort(why);
        }
        List<String> extracted = ReferenceExamples.extract(Files.readString(doc, StandardCharsets.UTF_8));
        List<ReferenceExamples.Copy> copies = ReferenceExamples.copies();
        assertEquals(extracted.size(), copies.size(), "one copy for each Java example of " + doc);
        for (int i = 0; i < copies.size(); i++) {
            assertEquals(extracted.get(i), copies.get(i).code(),
                    "tests/java/reference/" + copies.get(i).file() + " is not verbatim the reference's Java example " + (i + 1));
        }
    }
}
