import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Runs Kafka's command-line tools, one after another in one JVM, as their
 * scripts do (bin/kafka-configs.sh is "exec kafka-run-class.sh
 * org.apache.kafka.tools.ConfigCommand "$@""): each stdin line is a tool's
 * main class and its arguments, tab-separated. For each it prints what the
 * tool printed and its exit status, which Kafka's Exit utility (the tools'
 * only way out: org.apache.kafka.common.utils.Exit, in 4.x its internals
 * package) reports here instead of ending the JVM:
 *
 *   === <n> exit=<status>
 *   --- stdout
 *   ...
 *   --- stderr
 *   ...
 *
 * A line "sleep <ms>" waits (a real broker applies a change through its
 * metadata log a moment after it answers) and prints nothing.
 *
 * The status is that of the tool's first exit call, and what it prints
 * after it is dropped, as the script's JVM ends there.
 *
 * Output is caught by switching what System.out and System.err write to,
 * never the streams themselves: Scala's Console (Kafka 3.x's tools print
 * through it) keeps the System.out it first saw. Logging is set up before
 * the switch, so that its console appender keeps the real stderr.
 */
public class Tools {
    static final class Switch extends OutputStream {
        volatile OutputStream to;

        Switch(OutputStream to) {
            this.to = to;
        }

        @Override
        public void write(int b) throws java.io.IOException {
            to.write(b);
        }

        @Override
        public void write(byte[] b, int off, int len) throws java.io.IOException {
            to.write(b, off, len);
        }

        @Override
        public void flush() throws java.io.IOException {
            to.flush();
        }
    }

    static final class ToolExit extends RuntimeException {
        final int status;

        ToolExit(int status) {
            super(null, null, false, false);
            this.status = status;
        }
    }

    /** The status of the command's first exit call, or null. */
    static volatile Integer firstExit;
    static Switch outSwitch, errSwitch;

    public static void main(String[] args) throws Exception {
        Class<?> exit;
        try {
            exit = Class.forName("org.apache.kafka.common.utils.internals.Exit");
        } catch (ClassNotFoundException e) {
            exit = Class.forName("org.apache.kafka.common.utils.Exit");
        }
        Class<?> procedure = Class.forName(exit.getName() + "$Procedure");
        Object toThrow = Proxy.newProxyInstance(Tools.class.getClassLoader(), new Class<?>[] {procedure}, (proxy, m, a) -> {
            if (m.getName().equals("execute")) {
                // The script's JVM ends at the first exit: what a tool
                // prints after catching it (ClientMetricsCommand's catch
                // of Throwable, then its exit 1) is not the tool's.
                if (firstExit == null) {
                    firstExit = (Integer) a[0];
                    outSwitch.to = OutputStream.nullOutputStream();
                    errSwitch.to = OutputStream.nullOutputStream();
                }
                throw new ToolExit((Integer) a[0]);
            }
            if (m.getName().equals("hashCode")) {
                return 0;
            }
            if (m.getName().equals("equals")) {
                return proxy == a[0];
            }
            return "exit procedure";
        });
        exit.getMethod("setExitProcedure", procedure).invoke(null, toThrow);
        exit.getMethod("setHaltProcedure", procedure).invoke(null, toThrow);
        Class.forName("org.slf4j.LoggerFactory").getMethod("getLogger", String.class).invoke(null, "Tools");
        PrintStream out = System.out;
        PrintStream err = System.err;
        outSwitch = new Switch(out);
        errSwitch = new Switch(err);
        System.setOut(new PrintStream(outSwitch, true, StandardCharsets.UTF_8));
        System.setErr(new PrintStream(errSwitch, true, StandardCharsets.UTF_8));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        int n = 0;
        for (String line; (line = in.readLine()) != null; ) {
            if (line.isEmpty()) {
                continue;
            }
            if (line.startsWith("sleep ")) {
                Thread.sleep(Long.parseLong(line.substring(6)));
                continue;
            }
            String[] parts = line.split("\t", -1);
            ByteArrayOutputStream o = new ByteArrayOutputStream();
            ByteArrayOutputStream e = new ByteArrayOutputStream();
            outSwitch.to = o;
            errSwitch.to = e;
            int status = 0;
            firstExit = null;
            try {
                Method m = Class.forName(parts[0]).getMethod("main", String[].class);
                m.invoke(null, (Object) Arrays.copyOfRange(parts, 1, parts.length));
            } catch (InvocationTargetException ite) {
                Throwable c = ite.getCause();
                if (c instanceof ToolExit) {
                    status = ((ToolExit) c).status;
                } else {
                    status = -1;
                    c.printStackTrace(System.err);
                }
            } finally {
                if (firstExit != null) {
                    status = firstExit;
                }
                System.out.flush();
                System.err.flush();
                outSwitch.to = out;
                errSwitch.to = err;
            }
            out.println("=== " + n + " exit=" + status);
            out.println("--- stdout");
            out.print(o.toString(StandardCharsets.UTF_8));
            out.println("--- stderr");
            out.print(e.toString(StandardCharsets.UTF_8));
            out.flush();
            n++;
        }
        out.println("=== end");
        System.exit(0);
    }
}
