package dev.hookbox.conformance;

import static dev.hookbox.conformance.Sdk.CLIENT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.genai.gaos.models.credentials.Credential;
import com.google.genai.gaos.models.credentials.CredentialListResponse;
import com.google.genai.gaos.models.credentials.EnvironmentVariableConfig;
import com.google.genai.gaos.models.credentials.EnvironmentVariableConfigInjectionLocation;
import com.google.genai.gaos.models.credentials.HttpBearerConfig;
import com.google.genai.gaos.models.credentials.HttpBearerUpdateConfig;
import com.google.genai.gaos.models.credentials.InjectionLocationEnum;
import com.google.genai.gaos.models.credentials.OAuth2Config;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Credentials through the Java SDK: the three kinds, get, list, update, delete; secrets never come back. */
class CredentialsTest {

    @Test
    void createGetListUpdateDelete() {
        Credential bearer = Hookbox.wire("POST", "/v1beta/credentials", () -> CLIENT.credentials.create(
                HttpBearerConfig.builder().id("java_bearer").token("sup3r-s3cret-bearer").build()).credential().orElseThrow());
        assertEquals("java_bearer", bearer.id().orElse(""));
        assertEquals("active", bearer.status().orElseThrow().value());
        assertEquals("bearer_token", bearer.type().orElseThrow().value());
        assertTrue(bearer.createTime().isPresent() && bearer.updateTime().isPresent(), "times parse as timestamps");

        Credential env = Hookbox.wire("POST", "/v1beta/credentials", () -> CLIENT.credentials.create(
                EnvironmentVariableConfig.builder().id("java_env").value("sup3r-s3cret-env")
                        .injectionLocation(EnvironmentVariableConfigInjectionLocation.of(InjectionLocationEnum.HEADER))
                        .trustedDomains(List.of("api.example.com")).build()).credential().orElseThrow());
        assertEquals("environment_variable", env.type().orElseThrow().value());
        Credential oauth = Hookbox.wire("POST", "/v1beta/credentials", () -> CLIENT.credentials.create(
                OAuth2Config.builder().id("java_oauth").clientId("client").clientSecret("sup3r-s3cret-oauth")
                        .refreshToken("sup3r-s3cret-refresh").tokenUrl("https://auth.example.com/token")
                        .scopes(List.of("read")).build()).credential().orElseThrow());
        assertEquals("oauth2", oauth.type().orElseThrow().value());

        Credential got = Hookbox.wire("GET", "/v1beta/credentials/java_bearer",
                () -> CLIENT.credentials.get("java_bearer").credential().orElseThrow());
        assertEquals(bearer.createTime(), got.createTime());
        CredentialListResponse listed = Hookbox.wire("GET", "/v1beta/credentials",
                () -> CLIENT.credentials.listDirect().credentialListResponse().orElseThrow());
        List<String> ids = listed.credentials().orElse(List.of()).stream().map(c -> c.id().orElse("")).toList();
        assertTrue(ids.containsAll(List.of("java_bearer", "java_env", "java_oauth")), ids.toString());

        Credential updated = Hookbox.wire("PATCH", "/v1beta/credentials/java_bearer", () -> CLIENT.credentials.update(
                "java_bearer", HttpBearerUpdateConfig.builder().token("n3w-s3cret").build()).credential().orElseThrow());
        assertFalse(updated.updateTime().orElseThrow().isBefore(bearer.updateTime().orElseThrow()));

        for (var e : Hookbox.proxy().exchanges()) {
            if (e.path().contains("/credentials")) {
                assertFalse(e.text().contains("s3cret"), "a secret came back: " + e.path() + " " + e.text());
            }
        }
        for (String id : List.of("java_bearer", "java_env", "java_oauth")) {
            CLIENT.credentials.delete(id);
        }
        RuntimeException gone = assertThrows(RuntimeException.class, () -> CLIENT.credentials.get("java_bearer"));
        assertTrue(gone.toString().contains("404"), gone.toString());
    }
}
