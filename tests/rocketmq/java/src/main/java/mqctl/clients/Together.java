package mqctl.clients;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Several modes in one JVM, each in a thread of its own: {@code together --plan FILE}, where each line of FILE
 * is one mode and its options, tab-separated ({@code produce<TAB>--topic<TAB>T...}). A workload of many clients
 * (the chaos suite's) then costs one JVM's start, not one for each client. Every mode keeps its own history, its
 * own {@code --until} and a client instance of its own (Clients.INSTANCE_SUFFIX); the run ends when every mode has ended, with the largest of their exit codes (a mode
 * that throws prints its stack trace and counts 1).
 */
final class Together {
    private Together() {
    }

    static int run(Options options) throws Exception {
        Path plan = Path.of(options.text("plan"));
        options.checkAllRead();
        List<String[]> lines = new ArrayList<>();
        for (String line : Files.readAllLines(plan, StandardCharsets.UTF_8)) {
            if (!line.isBlank()) {
                lines.add(line.split("\t"));
            }
        }
        if (lines.isEmpty()) {
            throw new Options.UsageError("the plan " + plan + " names no mode");
        }
        for (String[] args : lines) {
            if (args[0].equals("together")) {
                throw new Options.UsageError("a plan cannot hold together itself");
            }
            Options.parse(args, 1); // every line's options are well formed before any client starts
        }
        AtomicInteger worst = new AtomicInteger();
        List<Thread> threads = new ArrayList<>();
        for (String[] args : lines) {
            String suffix = "-" + threads.size();
            Thread thread = new Thread(() -> {
                int code;
                Clients.INSTANCE_SUFFIX.set(suffix);
                try {
                    code = Main.run(args);
                } catch (Options.UsageError e) {
                    System.err.println("usage error in " + String.join(" ", args) + ": " + e.getMessage());
                    code = 2;
                } catch (Exception e) {
                    e.printStackTrace();
                    code = 1;
                }
                worst.accumulateAndGet(code, Math::max);
            }, "together-" + args[0] + "-" + threads.size());
            threads.add(thread);
            thread.start();
        }
        for (Thread thread : threads) {
            thread.join();
        }
        return worst.get();
    }
}
