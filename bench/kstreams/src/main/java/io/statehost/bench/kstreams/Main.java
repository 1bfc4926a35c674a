package io.statehost.bench.kstreams;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.CloseOptions.GroupMembershipOperation;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;

/**
 * The Kafka Streams contender of bench/: a keyed word count, run as a child process of the Go
 * bench. The only argument is the spec JSON (bench/child.go's spec); the only line on stdout is
 * {@code BENCH <json>}. See README.md beside pom.xml.
 */
public final class Main {
    static final String STORE = "counts";
    static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(60);
    static final long RESTORE_TIMEOUT_MINUTES = 10;

    /** The fields of the spec this contender reads; the others are ignored. */
    record Spec(String mode, List<String> brokers, String app, String input, String output,
                String guarantee, boolean coalesce, String dir, long commitIntervalNanos) {
        static Spec parse(String json) throws Exception {
            ObjectMapper m = new ObjectMapper()
                .configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);
            JsonNode n = m.readTree(json);
            List<String> brokers = new ArrayList<>();
            n.path("Brokers").forEach(b -> brokers.add(b.asText()));
            return new Spec(n.path("Mode").asText("process"), brokers, n.path("App").asText(),
                n.path("Input").asText(), n.path("Output").asText(),
                n.path("Guarantee").asText("at_least_once"), n.path("Coalesce").asBoolean(false),
                n.path("Dir").asText(), n.path("CommitInterval").asLong(1_000_000_000L));
        }
    }

    /**
     * The count: get the key's decimal count (null = 0), add 1, put it back, forward it.
     *
     * <p>The Processor API and not the DSL's count(): count() keeps a timestamped store of 8-byte
     * longs (value and timestamp), so its changelog would be neither comparable byte for byte
     * with the other contenders' changelogs nor checkable against the reference counts as
     * decimal strings.
     */
    static final class Count implements Processor<String, String, String, String> {
        private ProcessorContext<String, String> ctx;
        private KeyValueStore<String, String> store;

        @Override
        public void init(ProcessorContext<String, String> ctx) {
            this.ctx = ctx;
            this.store = ctx.getStateStore(STORE);
        }

        @Override
        public void process(Record<String, String> r) {
            if (r.key() == null) {
                return; // the workload has none; a store cannot hold a null key
            }
            String old = store.get(r.key());
            String next = Long.toString(old == null ? 1 : Long.parseLong(old) + 1);
            store.put(r.key(), next);
            ctx.forward(r.withValue(next));
        }
    }

    static Topology topology(Spec s) {
        // The store's changelog is <App>-counts-changelog (logging is on by default). The record
        // cache is opt-in for a Processor API store: with Coalesce it is enabled, so that writes
        // are coalesced per key until the commit (or an eviction) flushes them; without it, every
        // put goes straight to RocksDB and the changelog.
        StoreBuilder<KeyValueStore<String, String>> store = Stores.keyValueStoreBuilder(
            Stores.persistentKeyValueStore(STORE), Serdes.String(), Serdes.String());
        if (s.coalesce()) {
            store = store.withCachingEnabled();
        }
        Topology t = new Topology();
        t.addSource("input", new StringDeserializer(), new StringDeserializer(), s.input());
        t.addProcessor("count", Count::new, "input");
        t.addStateStore(store, "count");
        t.addSink("output", s.output(), new StringSerializer(), new StringSerializer(), "count");
        return t;
    }

    static Properties config(Spec s) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, s.app());
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, String.join(",", s.brokers()));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG,
            s.guarantee().equals("exactly_once") ? StreamsConfig.EXACTLY_ONCE_V2 : StreamsConfig.AT_LEAST_ONCE);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, TimeUnit.NANOSECONDS.toMillis(s.commitIntervalNanos()));
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Runtime.getRuntime().availableProcessors());
        p.put(StreamsConfig.STATE_DIR_CONFIG, s.dir());
        if (!s.coalesce()) {
            // No record cache: every write reaches the store and its changelog. With Coalesce the
            // default (10 MiB, shared by all threads) stays.
            p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
        }
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        // Kafka Streams' own default already; said so that a run never depends on it.
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        return p;
    }

    /**
     * Times a cold restore: the records restored, from the first onRestoreStart to the last
     * onRestoreEnd. Done when the instance is RUNNING and every changelog partition whose restore
     * started has ended it (a partition with nothing to restore has no callbacks at all).
     */
    static final class RestoreWatch implements StateRestoreListener {
        final CompletableFuture<Void> done = new CompletableFuture<>();
        private final Set<TopicPartition> pending = new HashSet<>();
        private long restored, first, last;
        private boolean started, running;

        @Override
        public synchronized void onRestoreStart(TopicPartition tp, String store, long from, long to) {
            if (!started) {
                started = true;
                first = System.nanoTime();
            }
            pending.add(tp);
        }

        @Override
        public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long n) {}

        @Override
        public synchronized void onRestoreEnd(TopicPartition tp, String store, long total) {
            last = System.nanoTime();
            restored += total;
            pending.remove(tp);
            check();
        }

        // A restore cut short by a rebalance (a task moving between this instance's threads):
        // its records count, and the partition is pending again once its restore restarts.
        @Override
        public synchronized void onRestoreSuspended(TopicPartition tp, String store, long total) {
            restored += total;
            pending.remove(tp);
        }

        synchronized void running(boolean r) {
            running = r;
            check();
        }

        private void check() {
            if (running && pending.isEmpty()) {
                done.complete(null);
            }
        }

        synchronized long restored() { return restored; }

        synchronized long nanos() { return started ? last - first : 0; }
    }

    /**
     * Closes the instance: the last commit happens here. It leaves the consumer group, where
     * Kafka Streams' default stays in it: otherwise the next instance of the same App (the cold
     * restore that follows every run) waits for the old members' session timeout (45 s)
     * before the group can rebalance.
     */
    static boolean close(KafkaStreams streams) {
        return streams.close(CloseOptions.groupMembershipOperation(GroupMembershipOperation.LEAVE_GROUP)
            .withTimeout(CLOSE_TIMEOUT));
    }

    private static final AtomicBoolean reported = new AtomicBoolean();

    /** Prints the one BENCH line, once; false if it was printed already. */
    static boolean report(long restored, long nanos, String error) {
        if (!reported.compareAndSet(false, true)) {
            return false;
        }
        Map<String, Object> rep = new LinkedHashMap<>();
        rep.put("Restored", restored);
        rep.put("RestoreNanos", nanos);
        rep.put("HeapBytes", Runtime.getRuntime().maxMemory());
        if (error != null) {
            rep.put("Error", error);
        }
        try {
            System.out.println("BENCH " + new ObjectMapper().writeValueAsString(rep));
        } catch (Exception e) {
            System.out.println("BENCH {\"Error\":\"cannot write the report\"}");
        }
        System.out.flush();
        return true;
    }

    static String message(Throwable e) {
        return e.getMessage() != null ? e.getClass().getSimpleName() + ": " + e.getMessage() : e.toString();
    }

    public static void main(String[] args) {
        if (args.length != 1) {
            report(0, 0, "usage: kstreams-bench.jar '<spec JSON>'");
            System.exit(2);
        }
        Spec s;
        try {
            s = Spec.parse(args[0]);
        } catch (Exception e) {
            report(0, 0, "bad spec: " + message(e));
            System.exit(2);
            return;
        }
        boolean restore = s.mode().equals("restore");
        KafkaStreams streams = new KafkaStreams(topology(s), config(s));
        // Completed exceptionally by a failure of the instance, in either mode.
        CompletableFuture<Void> failed = new CompletableFuture<>();
        RestoreWatch watch = new RestoreWatch();
        streams.setUncaughtExceptionHandler(e -> {
            failed.completeExceptionally(e);
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING && before != KafkaStreams.State.RUNNING) {
                System.err.printf("kstreams-bench: %s RUNNING %d ms after the JVM started%n",
                    s.app(), ManagementFactory.getRuntimeMXBean().getUptime());
            }
            if (now == KafkaStreams.State.ERROR) {
                failed.completeExceptionally(new IllegalStateException("Kafka Streams is in state ERROR"));
            }
            watch.running(now == KafkaStreams.State.RUNNING);
        });
        if (restore) {
            streams.setGlobalStateRestoreListener(watch);
        } else {
            // SIGTERM: close (the last commit happens there), report, and exit 0 rather than the
            // JVM's 143. halt, since exit cannot be called from a shutdown hook. If main reported
            // an error first, the JVM goes on exiting with its status.
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                boolean clean = close(streams);
                if (report(0, 0, clean ? null : "close timed out")) {
                    Runtime.getRuntime().halt(clean ? 0 : 1);
                }
            }, "kstreams-bench-shutdown"));
        }

        streams.start();
        if (!restore) {
            try {
                failed.join(); // returns only by an exception: SIGTERM's hook ends the JVM
            } catch (Exception e) {
                report(0, 0, message(e.getCause() != null ? e.getCause() : e));
                System.exit(1);
            }
            return;
        }
        String error = null;
        try {
            CompletableFuture.anyOf(watch.done, failed).get(RESTORE_TIMEOUT_MINUTES, TimeUnit.MINUTES);
        } catch (TimeoutException e) {
            error = "the restore did not end within " + RESTORE_TIMEOUT_MINUTES + " minutes";
        } catch (Exception e) {
            error = message(e.getCause() != null ? e.getCause() : e);
        }
        close(streams);
        report(watch.restored(), watch.nanos(), error);
        System.exit(error == null ? 0 : 1);
    }
}
