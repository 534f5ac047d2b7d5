import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

/**
 * Prints MM2's own translation of a consumer group's offsets, read from a checkpoints topic:
 * {@code TranslateOffsets BOOTSTRAP REMOTE_ALIAS GROUP} prints one line "topic partition offset metadata"
 * per partition, sorted by topic and partition.
 */
public final class TranslateOffsets {
    public static void main(String[] args) throws Exception {
        Map<String, Object> properties = new HashMap<>();
        properties.put("bootstrap.servers", args[0]);
        Map<TopicPartition, OffsetAndMetadata> offsets =
            RemoteClusterUtils.translateOffsets(properties, args[1], args[2], Duration.ofSeconds(30));
        Map<String, OffsetAndMetadata> sorted = new TreeMap<>();
        offsets.forEach((partition, offset) -> sorted.put(partition.topic() + " " + partition.partition(), offset));
        sorted.forEach((partition, offset) ->
            System.out.println(partition + " " + offset.offset() + " " + offset.metadata()));
    }
}
