package dev.hookbox.conformance;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.stream.Collectors;
import javax.tools.DiagnosticCollector;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;

/**
 * The reference documentation's Java examples: the verbatim copies in {@code tests/java/reference/}
 * (on the test class path as {@code reference/}), each a header comment naming its source and then
 * the example exactly as the reference shows it. {@link #extract} takes the examples from the
 * reference text itself, so a test can hold the copies to it when that text is present.
 *
 * <p>The reference shows each example as a snippet: {@code import} lines, then statements. A
 * snippet becomes the body of {@code call()} in a generated class, with its imports at the top;
 * after the body the harness adds one {@code return} of the variables a test wants to inspect
 * (named by the test). Nothing inside the snippet changes: its {@code new Client()} reads the
 * base URL and key from {@code GOOGLE_GEMINI_BASE_URL} and {@code GEMINI_API_KEY}, which
 * run.sh sets for this JVM.
 */
final class ReferenceExamples {
    private ReferenceExamples() {}

    /** The copies of the reference's Java examples, in the reference's order. */
    static final List<String> COPIES = List.of("1_security_gate.java", "2_privacy_gate.java", "3_audit_telemetry.java");

    /** One copy: its file name, its header comment, and the example's code below the header. */
    record Copy(String file, String header, String code) {}

    /**
     * Reads the copies. A copy is its header (the leading lines starting with {@code //}), one
     * blank line, then the example as {@link #extract} gives it.
     */
    static List<Copy> copies() throws IOException {
        List<Copy> copies = new ArrayList<>();
        for (String file : COPIES) {
            String text;
            try (InputStream in = ReferenceExamples.class.getClassLoader().getResourceAsStream("reference/" + file)) {
                if (in == null) {
                    throw new IllegalStateException("reference/" + file + " is not on the test class path (tests/java/reference/)");
                }
                text = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            }
            int end = 0;
            while (text.startsWith("//", end)) {
                end = text.indexOf('\n', end) + 1;
                if (end == 0) {
                    throw new IllegalStateException(file + ": nothing follows the header");
                }
            }
            if (end == 0 || !text.startsWith("\n", end)) {
                throw new IllegalStateException(file + ": expected a // header comment, then one blank line");
            }
            copies.add(new Copy(file, text.substring(0, end), text.substring(end + 1)));
        }
        return copies;
    }

    /**
     * The reference text: HOOKBOX_REFERENCE_DOC (run.sh sets it, by default to
     * shared/reference/… beside the checkout), or null when that is not set. The file itself
     * may be missing: a clean checkout does not have it.
     */
    static Path referenceDoc() {
        String path = System.getenv("HOOKBOX_REFERENCE_DOC");
        return path == null || path.isEmpty() ? null : Path.of(path);
    }

    /**
     * Every Java example of the reference, in order: the lines after a line reading exactly
     * {@code Java} up to the next line reading exactly {@code REST} (the reference's next
     * client), trimmed of blank lines at both ends.
     */
    static List<String> extract(String doc) {
        List<String> examples = new ArrayList<>();
        List<String> current = null;
        for (String line : doc.split("\n", -1)) {
            if (current == null) {
                if (line.equals("Java")) {
                    current = new ArrayList<>();
                }
            } else if (line.equals("REST") || line.equals("Java") || line.equals("Python")
                    || line.equals("JavaScript")) {
                examples.add(String.join("\n", current).strip() + "\n");
                current = line.equals("Java") ? new ArrayList<>() : null;
            } else {
                current.add(line);
            }
        }
        if (current != null) {
            throw new IllegalStateException("the reference's last Java example has no end");
        }
        return examples;
    }

    /** What running one example gave: the variables asked for, and what it printed. */
    record Run(Map<String, Object> vars, String stdout) {
        @SuppressWarnings("unchecked")
        <T> T get(String name) {
            return (T) vars.get(name);
        }
    }

    /**
     * Compiles {@code snippet} as the body of a method (its {@code import} lines above the class)
     * with the test's own class path, runs it in this JVM, and returns the variables named in
     * {@code returned} and everything it printed.
     */
    static Run run(String name, String snippet, List<String> returned, Path workDir) throws Exception {
        List<String> imports = new ArrayList<>();
        List<String> body = new ArrayList<>();
        boolean inBody = false;
        for (String line : snippet.split("\n", -1)) {
            if (!inBody && (line.startsWith("import ") || line.isBlank())) {
                if (!line.isBlank()) {
                    imports.add(line);
                }
            } else {
                inBody = true;
                body.add(line);
            }
        }
        String result = returned.stream()
                .map(v -> "\"" + v + "\", " + v)
                .collect(Collectors.joining(", ", "java.util.Map.of(", ")"));
        String source = String.join("\n", imports) + "\n\n"
                + "public final class " + name
                + " implements java.util.concurrent.Callable<java.util.Map<String, Object>> {\n"
                + "public java.util.Map<String, Object> call() throws Exception {\n"
                + String.join("\n", body) + "\n"
                + "return " + result + ";\n"
                + "}\n}\n";

        Path src = workDir.resolve("src");
        Path classes = workDir.resolve("classes");
        Files.createDirectories(src);
        Files.createDirectories(classes);
        Path file = src.resolve(name + ".java");
        Files.writeString(file, source, StandardCharsets.UTF_8);

        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        if (javac == null) {
            throw new IllegalStateException("no Java compiler in this JVM: the examples need a JDK, not a JRE");
        }
        DiagnosticCollector<JavaFileObject> diagnostics = new DiagnosticCollector<>();
        try (StandardJavaFileManager files = javac.getStandardFileManager(diagnostics, Locale.ROOT, StandardCharsets.UTF_8)) {
            List<String> options = List.of(
                    "-classpath", System.getProperty("java.class.path"),
                    "-d", classes.toString(),
                    "--release", "17");
            boolean ok = javac.getTask(null, files, diagnostics, options, null,
                    files.getJavaFileObjects(file.toFile())).call();
            if (!ok) {
                String errors = diagnostics.getDiagnostics().stream()
                        .map(d -> "line " + d.getLineNumber() + ": " + d.getMessage(Locale.ROOT).replaceAll("\\s+", " "))
                        .collect(Collectors.joining("\n"));
                throw new AssertionError("the reference's example does not compile against this SDK:\n"
                        + errors + "\n--- generated source ---\n" + source);
            }
        }

        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream original = System.out;
        PrintStream tee = new PrintStream(new TeeStream(original, captured), true, StandardCharsets.UTF_8);
        try (URLClassLoader loader = new URLClassLoader(new URL[] {classes.toUri().toURL()},
                ReferenceExamples.class.getClassLoader())) {
            @SuppressWarnings("unchecked")
            Callable<Map<String, Object>> example = (Callable<Map<String, Object>>)
                    loader.loadClass(name).getDeclaredConstructor().newInstance();
            System.setOut(tee);
            Map<String, Object> vars;
            try {
                vars = example.call();
            } finally {
                System.setOut(original);
            }
            return new Run(vars, captured.toString(StandardCharsets.UTF_8));
        }
    }

    /** Writes to two streams (what the example prints still shows in the test's output). */
    private static final class TeeStream extends OutputStream {
        private final OutputStream a;
        private final OutputStream b;

        TeeStream(OutputStream a, OutputStream b) {
            this.a = a;
            this.b = b;
        }

        @Override
        public void write(int c) throws IOException {
            a.write(c);
            b.write(c);
        }

        @Override
        public void write(byte[] buf, int off, int len) throws IOException {
            a.write(buf, off, len);
            b.write(buf, off, len);
        }

        @Override
        public void flush() throws IOException {
            a.flush();
            b.flush();
        }
    }
}
