package org.apache.kafka.connect.mirror;

import java.util.HashMap;
import java.util.Map;
import java.util.OptionalLong;

import org.apache.kafka.common.TopicPartition;

/**
 * Prints how MM2's own offset-sync store translates upstream offsets, from the offset-syncs topic on the source
 * cluster ({@code offset-syncs.topic.location = source}): {@code ReadOffsetSyncs BOOTSTRAP SOURCE_ALIAS
 * TARGET_ALIAS TOPIC:PARTITION:OFFSET[,OFFSET...] ...} prints "topic partition upstream downstream" per offset,
 * with "none" when the store has no sync for the partition.  It lives in MM2's package because the store's
 * constructor is package-private.
 */
public final class ReadOffsetSyncs {
    public static void main(String[] args) throws Exception {
        Map<String, String> properties = new HashMap<>();
        properties.put("name", "airmirror-offset-sync-reader");
        properties.put("connector.class", MirrorCheckpointConnector.class.getName());
        properties.put("source.cluster.alias", args[1]);
        properties.put("target.cluster.alias", args[2]);
        properties.put("offset-syncs.topic.location", "source");
        properties.put("source.cluster.bootstrap.servers", args[0]);
        try (OffsetSyncStore store = new OffsetSyncStore(new MirrorCheckpointConfig(properties))) {
            store.start(false);
            for (int i = 3; i < args.length; i++) {
                String[] query = args[i].split(":");
                TopicPartition partition = new TopicPartition(query[0], Integer.parseInt(query[1]));
                for (String offset : query[2].split(",")) {
                    OptionalLong downstream = store.translateDownstream(null, partition, Long.parseLong(offset));
                    System.out.println(query[0] + " " + query[1] + " " + offset + " "
                        + (downstream.isPresent() ? Long.toString(downstream.getAsLong()) : "none"));
                }
            }
        }
    }
}
