package dev.hookbox.conformance;

import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.genai.Client;
import com.google.genai.gaos.utils.JSON;
import com.google.genai.types.HttpOptions;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The server under test and what every test shares: an SDK client pointed at it (through
 * {@link RecordingProxy}, so the bytes hookbox sent are kept), a plain HTTP client, and the
 * check that the SDK's own types lost nothing of an answer.
 */
final class Hookbox {
    static final String AGENT = "antigravity-preview-09-2026";
    private static final ObjectMapper PLAIN = new ObjectMapper();
    private static RecordingProxy proxy;

    private Hookbox() {}

    static String env(String name) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            throw new IllegalStateException(name + " is not set: run tests/java/run.sh, which starts hookbox serve");
        }
        return v;
    }

    /** hookbox's own base URL (not the proxy's). */
    static String baseUrl() {
        return env("HOOKBOX_BASE_URL");
    }

    static String key() {
        return env("HOOKBOX_TEST_KEY");
    }

    static synchronized RecordingProxy proxy() {
        if (proxy == null) {
            try {
                proxy = new RecordingProxy(baseUrl());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return proxy;
    }

    /**
     * An SDK client configured the documented way: the key, and the base URL and API version
     * through {@link HttpOptions} (the base URL is the recording proxy's, which forwards to
     * hookbox unchanged).
     */
    static Client client() {
        return clientFor(proxy().url(), key());
    }

    static Client clientFor(String baseUrl, String key) {
        return Client.builder()
                .apiKey(key)
                .httpOptions(HttpOptions.builder().baseUrl(baseUrl).apiVersion("v1beta").build())
                .build();
    }

    /** A plain HTTP request to hookbox itself (no SDK, no proxy); returns status and body. */
    static HttpResponse<String> raw(String method, String path, String jsonBody) {
        HttpRequest.Builder req = HttpRequest.newBuilder(URI.create(baseUrl() + path))
                .timeout(Duration.ofSeconds(120))
                .header("x-goog-api-key", key())
                .method(method, jsonBody == null
                        ? HttpRequest.BodyPublishers.noBody()
                        : HttpRequest.BodyPublishers.ofString(jsonBody, StandardCharsets.UTF_8));
        if (jsonBody != null) {
            req.header("content-type", "application/json");
        }
        try {
            return HttpClient.newHttpClient().send(req.build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    /** GET {@code path} from hookbox, parsed as JSON (a non-200 fails the test). */
    static JsonNode getJson(String path) {
        HttpResponse<String> r = raw("GET", path, null);
        if (r.statusCode() != 200) {
            fail("GET " + path + " answered " + r.statusCode() + ": " + r.body());
        }
        return parse(r.body());
    }

    static JsonNode parse(String json) {
        try {
            return PLAIN.readTree(json);
        } catch (IOException e) {
            throw new AssertionError("not JSON: " + json, e);
        }
    }

    static JsonNode parse(byte[] json) {
        return parse(new String(json, StandardCharsets.UTF_8));
    }

    /** The SDK object as the SDK itself serialises it. */
    static JsonNode sdkJson(Object sdkObject) {
        return JSON.getMapper().valueToTree(sdkObject);
    }

    /**
     * Fails unless the SDK object, serialised by the SDK's own mapper, holds every field of
     * {@code wire} (what hookbox sent) with the same value. {@code extensions} are JSON paths
     * ({@code *} for any key or index) of hookbox extensions the SDK has no field for and is
     * expected to drop; {@code computed} are paths the SDK fills in itself (such as
     * {@code /output_text}).
     */
    static void assertNothingLost(String what, Object sdkObject, JsonNode wire, Set<String> extensions, Set<String> computed) {
        List<String> problems = new ArrayList<>();
        diff("", wire, sdkJson(sdkObject), extensions, computed, problems);
        if (!problems.isEmpty()) {
            fail(what + ": the SDK's types do not hold what hookbox sent:\n  " + String.join("\n  ", problems)
                    + "\nwire: " + wire + "\nsdk:  " + sdkJson(sdkObject));
        }
    }

    static void assertNothingLost(String what, Object sdkObject, JsonNode wire) {
        assertNothingLost(what, sdkObject, wire, Set.of(), Set.of());
    }

    /**
     * What the Java SDK may drop from an answer, each for a reason docs/java.md gives:
     * <ul>
     *   <li>{@code hooks} on tool result steps: hookbox's trace of the hooks that ran (an
     *       extension; the SDK's step types keep no unknown fields);
     *   <li>{@code environment_id} of the interaction in streamed {@code interaction.created} and
     *       {@code interaction.completed} events (an extension the Python SDK keeps; Java's
     *       {@code InteractionSseEventInteraction} has no such field);
     *   <li>the fields of a {@code function_result} whose {@code result} is an object: the SDK
     *       maps any object to {@code FunctionResultStepResult}, a class with no fields (an SDK
     *       defect; the sandbox's file tools answer with objects).
     * </ul>
     */
    static Set<String> javaDrops(JsonNode wire) {
        Set<String> paths = new java.util.HashSet<>(Set.of(
                "/steps/*/hooks", "/interaction/steps/*/hooks", "/step/hooks",
                "/interaction/environment_id"));
        objectResults("", wire, paths);
        return paths;
    }

    private static void objectResults(String path, JsonNode node, Set<String> out) {
        if (node == null) {
            return;
        }
        if (node.isObject()) {
            if ("function_result".equals(node.path("type").asText()) && node.path("result").isObject()) {
                out.add(path + "/result/*");
            }
            for (Iterator<Map.Entry<String, JsonNode>> it = node.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> f = it.next();
                objectResults(path + "/" + f.getKey(), f.getValue(), out);
            }
        } else if (node.isArray()) {
            for (int i = 0; i < node.size(); i++) {
                objectResults(path + "/" + i, node.get(i), out);
            }
        }
    }

    /**
     * Runs one SDK call and checks its answer against the bytes hookbox sent for the first
     * {@code method} request to a path starting with {@code pathPrefix} that it made: the SDK
     * object must hold every field (but {@link #javaDrops}), and {@code output_text} is the SDK's
     * own.
     */
    static <T> T wire(String method, String pathPrefix, java.util.function.Supplier<T> call) {
        RecordingProxy p = proxy();
        int mark = p.mark();
        T result = call.get();
        JsonNode sent;
        try {
            sent = parse(p.after(mark, method, pathPrefix).body());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
        assertNothingLost(method + " " + pathPrefix, result, sent, javaDrops(sent), Set.of("/output_text"));
        return result;
    }

    /** The {@code data:} payloads of a server-sent event stream, in order ({@code [DONE]} left out). */
    static List<JsonNode> sseData(String stream) {
        List<JsonNode> out = new ArrayList<>();
        for (String block : stream.replace("\r\n", "\n").split("\n\n")) {
            StringBuilder data = new StringBuilder();
            for (String line : block.split("\n")) {
                if (line.startsWith("data:")) {
                    if (data.length() > 0) {
                        data.append('\n');
                    }
                    data.append(line.substring(5).strip());
                }
            }
            if (data.length() > 0 && !data.toString().equals("[DONE]")) {
                out.add(parse(data.toString()));
            }
        }
        return out;
    }

    private static boolean matches(Set<String> patterns, String path) {
        for (String p : patterns) {
            String[] ps = p.split("/", -1);
            String[] xs = path.split("/", -1);
            if (ps.length != xs.length) {
                continue;
            }
            boolean ok = true;
            for (int i = 0; i < ps.length && ok; i++) {
                ok = ps[i].equals("*") || ps[i].equals(xs[i]);
            }
            if (ok) {
                return true;
            }
        }
        return false;
    }

    private static void diff(String path, JsonNode wire, JsonNode sdk, Set<String> extensions, Set<String> computed,
            List<String> problems) {
        if (matches(extensions, path) || matches(computed, path)) {
            return;
        }
        boolean wireAbsent = wire == null || wire.isNull() || wire.isMissingNode();
        boolean sdkAbsent = sdk == null || sdk.isNull() || sdk.isMissingNode();
        if (wireAbsent || sdkAbsent) {
            if (wireAbsent != sdkAbsent) {
                problems.add((wireAbsent ? "added by the SDK " : "lost ") + path + " = " + (wireAbsent ? sdk : wire));
            }
            return;
        }
        if (wire.isObject() && sdk.isObject()) {
            for (Iterator<Map.Entry<String, JsonNode>> it = wire.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> f = it.next();
                diff(path + "/" + f.getKey(), f.getValue(), sdk.get(f.getKey()), extensions, computed, problems);
            }
            for (Iterator<Map.Entry<String, JsonNode>> it = sdk.fields(); it.hasNext(); ) {
                Map.Entry<String, JsonNode> f = it.next();
                if (!wire.has(f.getKey())) {
                    diff(path + "/" + f.getKey(), null, f.getValue(), extensions, computed, problems);
                }
            }
        } else if (wire.isArray() && sdk.isArray()) {
            if (wire.size() != sdk.size()) {
                problems.add("length of " + path + ": " + wire.size() + " sent, " + sdk.size() + " parsed");
                return;
            }
            for (int i = 0; i < wire.size(); i++) {
                diff(path + "/" + i, wire.get(i), sdk.get(i), extensions, computed, problems);
            }
        } else if (wire.isNumber() && sdk.isNumber()) {
            if (wire.decimalValue().compareTo(sdk.decimalValue()) != 0) {
                problems.add("changed " + path + ": " + wire + " sent, " + sdk + " parsed");
            }
        } else if (!wire.equals(sdk)) {
            problems.add("changed " + path + ": " + wire + " sent, " + sdk + " parsed");
        }
    }
}
