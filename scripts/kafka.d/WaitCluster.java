// WaitCluster waits until a Kafka cluster answers with all of the given brokers, for
// scripts/kafka (which compiles it once into its cache folder). A broker counts when the
// cluster's metadata (DescribeCluster, which lists only unfenced brokers) names it and the
// broker itself answers a request addressed to it (DescribeConfigs of its BROKER resource):
// a node killed a moment ago may still be in the metadata, but it answers nothing.
//
// Usage: java -cp JARS:CLASSES WaitCluster BOOTSTRAP IDS TIMEOUT_SECONDS [CLIENT_PROPERTIES]
//   BOOTSTRAP  host:port,...   IDS  1,2,3
//   CLIENT_PROPERTIES  a file of admin client settings (security.protocol, sasl.*, ssl.*) for
//   a secured listener: the cluster's metadata then names the brokers' addresses on it, so
//   that each broker answers there.
// Exits 0 when every broker in IDS is there, 1 at the timeout (printing what it last saw).
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.config.ConfigResource;

public class WaitCluster {
    public static void main(String[] args) throws InterruptedException {
        if (args.length != 3 && args.length != 4) {
            System.err.println("usage: WaitCluster BOOTSTRAP IDS TIMEOUT_SECONDS [CLIENT_PROPERTIES]");
            System.exit(2);
        }
        Set<Integer> want = new TreeSet<>();
        for (String id : args[1].split(",")) {
            want.add(Integer.parseInt(id.trim()));
        }
        Instant deadline = Instant.now().plusSeconds(Long.parseLong(args[2]));
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "2000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "3000");
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, "100");
        p.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "500");
        p.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, "100");
        p.put(AdminClientConfig.RETRY_BACKOFF_MAX_MS_CONFIG, "500");
        if (args.length == 4) {
            try (InputStream in = new FileInputStream(args[3])) {
                p.load(in);
            } catch (IOException e) {
                System.err.println("reading " + args[3] + ": " + e);
                System.exit(2);
            }
        }
        String last = "no answer yet";
        Admin admin = Admin.create(p);
        try {
            while (true) {
                try {
                    Set<Integer> seen = new TreeSet<>();
                    for (Node n : admin.describeCluster().nodes().get(3, TimeUnit.SECONDS)) {
                        seen.add(n.id());
                    }
                    if (!seen.containsAll(want)) {
                        last = "metadata lists brokers " + seen + ", want " + want;
                    } else {
                        List<ConfigResource> rs = new ArrayList<>();
                        for (int id : want) {
                            rs.add(new ConfigResource(ConfigResource.Type.BROKER, Integer.toString(id)));
                        }
                        admin.describeConfigs(rs).all().get(3, TimeUnit.SECONDS);
                        System.out.println("brokers " + seen);
                        return;
                    }
                } catch (Exception e) {
                    Throwable c = e.getCause() != null ? e.getCause() : e;
                    last = c.getClass().getSimpleName() + ": " + c.getMessage();
                }
                if (Instant.now().isAfter(deadline)) {
                    System.err.println("brokers " + want + " not all up after " + args[2] + "s: " + last);
                    System.exit(1);
                }
                Thread.sleep(200);
            }
        } finally {
            admin.close(Duration.ofSeconds(1));
        }
    }
}
