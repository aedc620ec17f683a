package mqctl.tools;

/**
 * RocketMQ's mqadmin (MQAdminStartup), then an immediate exit.
 *
 * <p>MQAdminStartup.main runs one sub-command to its end, output included, and returns; the JVM then
 * lingers for about three seconds while Netty's event loops, shut down gracefully by the admin client,
 * wait out their quiet period. Nothing is printed or sent in that time, so the tests exit as soon as
 * main returns. mqadmin exits 0 whatever the sub-command did (it prints its failures), as here.
 */
public final class MqadminThenExit {
    private MqadminThenExit() {
    }

    public static void main(String[] args) {
        org.apache.rocketmq.tools.command.MQAdminStartup.main(args);
        System.out.flush();
        System.err.flush();
        System.exit(0);
    }
}
