package dev.hookbox.conformance;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * A loopback HTTP proxy between the SDK and hookbox that keeps every answer's bytes as hookbox
 * sent them, so a test can compare what the SDK parsed with what came over the wire. It forwards
 * method, path, query, headers and body unchanged and streams answers through as they arrive
 * (server-sent events reach the SDK live).
 */
final class RecordingProxy implements AutoCloseable {
    /** One exchange as hookbox answered it. */
    record Exchange(String method, String path, int status, String contentType, byte[] body) {
        String text() {
            return new String(body, java.nio.charset.StandardCharsets.UTF_8);
        }
    }

    // Hop-by-hop headers, which java.net.http sets itself. Host is passed on, as a reverse proxy
    // does (pom.xml lets java.net.http send it), so the upload URL hookbox answers points back
    // through this proxy: the Java SDK posts upload chunks to that URL as given.
    private static final Set<String> HOP_BY_HOP = Set.of(
            "connection", "content-length", "expect", "upgrade", "transfer-encoding",
            "keep-alive", "te", "trailer", "proxy-connection");

    private final URI upstream;
    private final HttpServer server;
    private final ExecutorService pool = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "recording-proxy");
        t.setDaemon(true);
        return t;
    });
    private final HttpClient http = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(10))
            .build();
    private final List<Exchange> exchanges = new ArrayList<>();

    RecordingProxy(String upstream) throws IOException {
        this.upstream = URI.create(upstream.endsWith("/") ? upstream.substring(0, upstream.length() - 1) : upstream);
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 64);
        server.createContext("/", this::forward);
        server.setExecutor(pool);
        server.start();
    }

    /** The proxy's base URL, for the SDK. */
    String url() {
        return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    /** Every exchange so far, oldest first. */
    synchronized List<Exchange> exchanges() {
        return List.copyOf(exchanges);
    }

    /** How many exchanges have been recorded: a mark for {@link #after}. */
    synchronized int mark() {
        return exchanges.size();
    }

    /**
     * The first exchange recorded after {@code mark} whose method is {@code method} and whose path
     * starts with {@code pathPrefix}. The SDK may have its answer a moment before the proxy has
     * written it down, so this waits for it (60 s at most, which only a hung test reaches).
     */
    synchronized Exchange after(int mark, String method, String pathPrefix) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
        while (true) {
            for (int i = mark; i < exchanges.size(); i++) {
                Exchange e = exchanges.get(i);
                if (e.method().equals(method) && e.path().startsWith(pathPrefix)) {
                    return e;
                }
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw new AssertionError("no " + method + " " + pathPrefix + "… went through the proxy; saw "
                        + exchanges.subList(mark, exchanges.size()).stream().map(e -> e.method() + " " + e.path()).toList());
            }
            wait(Math.max(1, left / 1_000_000));
        }
    }

    private void forward(HttpExchange ex) throws IOException {
        try (ex) {
            String pathAndQuery = ex.getRequestURI().getRawPath()
                    + (ex.getRequestURI().getRawQuery() == null ? "" : "?" + ex.getRequestURI().getRawQuery());
            byte[] body = ex.getRequestBody().readAllBytes();
            HttpRequest.Builder req = HttpRequest.newBuilder(URI.create(upstream + pathAndQuery))
                    .timeout(Duration.ofSeconds(300))
                    .method(ex.getRequestMethod(), body.length == 0
                            ? HttpRequest.BodyPublishers.noBody()
                            : HttpRequest.BodyPublishers.ofByteArray(body));
            ex.getRequestHeaders().forEach((name, values) -> {
                if (!HOP_BY_HOP.contains(name.toLowerCase(Locale.ROOT))) {
                    values.forEach(v -> req.header(name, v));
                }
            });
            HttpResponse<InputStream> resp;
            try {
                resp = http.send(req.build(), HttpResponse.BodyHandlers.ofInputStream());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException(e);
            }
            resp.headers().map().forEach((name, values) -> {
                if (!HOP_BY_HOP.contains(name.toLowerCase(Locale.ROOT)) && !name.startsWith(":")) {
                    ex.getResponseHeaders().put(name, values);
                }
            });
            ByteArrayOutputStream copy = new ByteArrayOutputStream();
            boolean head = ex.getRequestMethod().equals("HEAD");
            ex.sendResponseHeaders(resp.statusCode(), head ? -1 : 0);
            OutputStream out = ex.getResponseBody();
            try (InputStream in = resp.body()) {
                byte[] buf = new byte[8192];
                for (int n; (n = in.read(buf)) > 0; ) {
                    copy.write(buf, 0, n);
                    out.write(buf, 0, n);
                    out.flush();
                }
            } finally {
                // Written down before the answer ends, so a client that has the whole answer
                // finds it here (after() still waits, for the window in between).
                synchronized (this) {
                    exchanges.add(new Exchange(ex.getRequestMethod(), pathAndQuery, resp.statusCode(),
                            resp.headers().firstValue("content-type").orElse(""), copy.toByteArray()));
                    notifyAll();
                }
                out.close();
            }
        }
    }

    @Override
    public void close() {
        server.stop(0);
        pool.shutdownNow();
    }
}
