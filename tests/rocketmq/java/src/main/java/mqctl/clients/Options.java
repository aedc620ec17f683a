package mqctl.clients;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/** The program's options: {@code --name value} pairs after the mode; every name must be one the mode reads. */
final class Options {
    private final Map<String, String> values = new HashMap<>();
    private final Set<String> read = new HashSet<>();

    static Options parse(String[] args, int from) {
        Options options = new Options();
        for (int i = from; i < args.length; i += 2) {
            if (!args[i].startsWith("--") || i + 1 >= args.length) {
                throw new UsageError("expected --name value, got " + args[i]);
            }
            options.values.put(args[i].substring(2), args[i + 1]);
        }
        return options;
    }

    String text(String name) {
        read.add(name);
        String value = values.get(name);
        if (value == null) {
            throw new UsageError("--" + name + " is required");
        }
        return value;
    }

    String text(String name, String fallback) {
        read.add(name);
        return values.getOrDefault(name, fallback);
    }

    long number(String name, long fallback) {
        String value = text(name, Long.toString(fallback));
        try {
            return Long.parseLong(value);
        } catch (NumberFormatException e) {
            throw new UsageError("--" + name + " must be a number, got " + value);
        }
    }

    boolean has(String name) {
        read.add(name);
        return values.containsKey(name);
    }

    /** Refuses an option the mode never read: a typo must not pass silently. */
    void checkAllRead() {
        for (String name : values.keySet()) {
            if (!read.contains(name)) {
                throw new UsageError("unknown option --" + name);
            }
        }
    }

    static final class UsageError extends RuntimeException {
        private static final long serialVersionUID = 1L;

        UsageError(String message) {
            super(message);
        }
    }
}
