package dev.hookbox.conformance;

import static dev.hookbox.conformance.Sdk.CLIENT;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.genai.gaos.models.environments.CreateEnvironmentRequest;
import com.google.genai.gaos.models.environments.CreateEnvironmentRequestNetworkEnum;
import com.google.genai.gaos.models.environments.CreateEnvironmentRequestNetworkUnion;
import com.google.genai.gaos.models.environments.Environment;
import com.google.genai.gaos.models.environments.EnvironmentFile;
import com.google.genai.gaos.models.environments.GetEnvironmentFilesResponse;
import com.google.genai.gaos.models.environments.ListEnvironmentsResponse;
import com.google.genai.gaos.models.interactions.Allowlist;
import com.google.genai.gaos.models.interactions.AllowlistEntry;
import com.google.genai.gaos.models.interactions.EnvironmentNetworkEgressAllowlist;
import com.google.genai.gaos.models.interactions.Transform;
import com.google.genai.gaos.models.operations.GetEnvironmentFilesRequest;
import com.google.genai.gaos.models.operations.UploadEnvironmentFileResponse;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Environments through the Java SDK: create, get, list, files list/upload/download, fork, delete. */
class EnvironmentsTest {

    static GetEnvironmentFilesResponse files(String env, String path) {
        return Hookbox.wire("GET", "/v1beta/environments/" + env + "/files/",
                () -> CLIENT.environments.files().list(GetEnvironmentFilesRequest.builder()
                        .environment(env).path(path).recursive(true).build()).getEnvironmentFilesResponse().orElseThrow());
    }

    static List<String> paths(GetEnvironmentFilesResponse r) {
        return r.files().orElse(List.of()).stream().map(f -> f.path().orElse("?")).toList();
    }

    @Test
    void createGetListFilesForkDelete() {
        Environment env = Hookbox.wire("POST", "/v1beta/environments", () -> CLIENT.environments.createEnvironment(
                CreateEnvironmentRequest.builder()
                        .sources(List.of(Sdk.inline("a.txt", "hi")))
                        .network(CreateEnvironmentRequestNetworkUnion.of(CreateEnvironmentRequestNetworkEnum.DISABLED))
                        .build()).environment().orElseThrow());
        String id = env.id().orElseThrow();
        assertTrue(id.startsWith("env_"), id);
        assertEquals("1", env.fileCount().orElse(""), "int64 fields come as decimal strings");
        assertEquals("2", env.sizeBytes().orElse(""));

        Environment got = Hookbox.wire("GET", "/v1beta/environments/" + id,
                () -> CLIENT.environments.getEnvironment(id).environment().orElseThrow());
        assertEquals(env.id(), got.id());
        assertEquals("active", got.status().orElseThrow().value());
        ListEnvironmentsResponse listed = Hookbox.wire("GET", "/v1beta/environments",
                () -> CLIENT.environments.listEnvironments(null, 100, null, null).listEnvironmentsResponse().orElseThrow());
        assertTrue(listed.environments().orElse(List.of()).stream().anyMatch(e -> e.id().equals(env.id())));

        // Every sandbox environment starts with /.agents, /tmp and /workspace.
        assertEquals(List.of("/.agents", "/a.txt", "/tmp", "/workspace"), paths(files(id, "")));
        assertArrayEquals("hi".getBytes(StandardCharsets.UTF_8), CLIENT.environments.files().download(id, "a.txt"));

        byte[] bytes = "uploaded bytes".getBytes(StandardCharsets.UTF_8);
        RecordingProxy p = Hookbox.proxy();
        int mark = p.mark();
        UploadEnvironmentFileResponse up = CLIENT.environments.files().upload(id, "up/load.txt", bytes, "text/plain", true, false);
        EnvironmentFile uploaded = up.files().orElseThrow().files().orElseThrow().get(0);
        assertEquals("/up/load.txt", uploaded.path().orElse(""));
        assertEquals(String.valueOf(bytes.length), uploaded.sizeBytes().orElse(""));
        try {
            // The chunks went to the X-Goog-Upload-URL hookbox answered, which names the host
            // the client used (here the proxy), and its final answer lost nothing.
            RecordingProxy.Exchange fin = p.after(mark, "POST", "/upload/v1beta/sessions/");
            Hookbox.assertNothingLost("upload", up.files().orElseThrow(), Hookbox.parse(fin.body()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
        assertArrayEquals(bytes, CLIENT.environments.files().download(id, "/up/load.txt"));
        EnvironmentFile listedFile = files(id, "up/load.txt").files().orElseThrow().get(0);
        assertEquals("load.txt", listedFile.name().orElse(""));
        assertEquals("file", listedFile.type().orElseThrow().value());

        Environment fork = Hookbox.wire("POST", "/v1beta/environments", () -> CLIENT.environments.createEnvironment(
                CreateEnvironmentRequest.builder().fromEnvironment("environments/" + id).build()).environment().orElseThrow());
        assertNotEquals(env.id(), fork.id());
        assertArrayEquals(bytes, CLIENT.environments.files().download(fork.id().orElseThrow(), "up/load.txt"));

        CLIENT.environments.deleteEnvironment(id);
        RuntimeException gone = assertThrows(RuntimeException.class, () -> CLIENT.environments.getEnvironment(id));
        assertTrue(gone.toString().contains("404"), gone.toString());
        CLIENT.environments.deleteEnvironment(fork.id().orElseThrow());
    }

    @Test
    void anAllowlistWithTransformsIsEchoedWithoutItsSecrets() {
        Environment env = Hookbox.wire("POST", "/v1beta/environments", () -> CLIENT.environments.createEnvironment(
                CreateEnvironmentRequest.builder()
                        .network(CreateEnvironmentRequestNetworkUnion.of(EnvironmentNetworkEgressAllowlist.builder()
                                .allowlist(Allowlist.of(List.of(
                                        AllowlistEntry.builder().domain("api.example.com")
                                                .transform(Transform.of(Map.of("Authorization", "Bearer s3cr3t-transform")))
                                                .build(),
                                        AllowlistEntry.builder().domain("*").build()))).build()))
                        .build()).environment().orElseThrow());
        String raw = Hookbox.raw("GET", "/v1beta/environments/" + env.id().orElseThrow(), null).body();
        assertTrue(raw.contains("api.example.com"), raw);
        Environment got = Hookbox.wire("GET", "/v1beta/environments/",
                () -> CLIENT.environments.getEnvironment(env.id().orElseThrow()).environment().orElseThrow());
        assertTrue(got.network().isPresent(), got.toString());
        assertFalse(raw.contains("s3cr3t-transform"), "the transform's secret is never echoed: " + raw);
        CLIENT.environments.deleteEnvironment(env.id().orElseThrow());
    }
}
