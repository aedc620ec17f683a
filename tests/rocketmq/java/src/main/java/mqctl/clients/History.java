package mqctl.clients;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * What a run did, one line per event, written and flushed as it happens so that a test can follow it:
 * {@code KIND <TAB> wall-clock millis <TAB> fields...}. Lines from several threads never interleave.
 * The kinds and their fields are listed in tests/rocketmq/client_history.py, which reads them.
 */
final class History implements AutoCloseable {
    private final BufferedWriter out;

    History(Path path) {
        try {
            out = Files.newBufferedWriter(path, StandardCharsets.UTF_8, StandardOpenOption.CREATE,
                StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    synchronized void write(String kind, Object... fields) {
        StringBuilder line = new StringBuilder(kind).append('\t').append(System.currentTimeMillis());
        for (Object field : fields) {
            line.append('\t').append(clean(String.valueOf(field)));
        }
        try {
            out.write(line.toString());
            out.newLine();
            out.flush();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** An exception as one field: its class and first line, without tabs or line breaks. */
    static String describe(Throwable error) {
        Throwable cause = error;
        while (cause.getCause() != null && cause.getCause() != cause) {
            cause = cause.getCause();
        }
        String text = error.getClass().getSimpleName() + ": " + error.getMessage();
        if (cause != error) {
            text += " (cause " + cause.getClass().getSimpleName() + ": " + cause.getMessage() + ")";
        }
        return text.length() > 400 ? text.substring(0, 400) : text;
    }

    private static String clean(String text) {
        return text.replaceAll("\\s+", " ");
    }

    @Override
    public synchronized void close() {
        try {
            out.close();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
