package eoskafka.faults;

import java.io.File;
import java.io.IOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager;

/**
 * Spark's checkpoint file manager, except that it halts the driver JVM (as SIGKILL would)
 * just before Spark writes the commit log entry of one batch: the sink's output of that
 * batch is complete, Spark's record that the batch is done is not.
 *
 * Armed by EOSKAFKA_KILL_BEFORE_COMMIT_LOG=BATCH@FLAG; fires once (FLAG is created first).
 * Selected with spark.sql.streaming.checkpointFileManagerClass=eoskafka.faults.KillBeforeCommitLog.
 */
public class KillBeforeCommitLog extends FileContextBasedCheckpointFileManager {
    public KillBeforeCommitLog(Path path, Configuration conf) {
        super(path, conf);
    }

    @Override
    public CheckpointFileManager.CancellableFSDataOutputStream createAtomic(Path path,
                                                                            boolean overwrite) {
        String spec = System.getenv("EOSKAFKA_KILL_BEFORE_COMMIT_LOG");
        if (spec != null && path.getParent() != null
                && path.getParent().getName().equals("commits")) {
            String[] parts = spec.split("@", 2);
            File flag = new File(parts[1]);
            if (path.getName().equals(parts[0]) && !flag.exists()) {
                try {
                    flag.createNewFile();
                } catch (IOException e) {
                    throw new RuntimeException(e);
                }
                Runtime.getRuntime().halt(137);
            }
        }
        return super.createAtomic(path, overwrite);
    }
}
