/*
 * RocksDB databases holding SST files ingested from outside (SstFileWriter + ingestExternalFile),
 * with what RocksDB reads from each: the bytes behind pyref's rule for such files' global sequence
 * number (tests/flink/data/rocksdb-external/README.md). Flink's RocksDB backend never writes such
 * files; RocksDB does when a user ingests them.
 *
 *     java -cp flink-dist-2.3.0.jar compat_tests/rocksdb/ExternalSstFiles.java OUT
 *
 * OUT/written/: the database "written" with the global sequence number written back into the
 * ingested file (write_global_seqno); OUT/manifest-only/: the same without (the number is in the
 * MANIFEST alone). Each holds its SST files and truth.txt, the database's live keys and values
 * as RocksDB's iterator reads them (hex key, tab, hex value per line).
 */

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

import org.rocksdb.CompressionType;
import org.rocksdb.EnvOptions;
import org.rocksdb.FlushOptions;
import org.rocksdb.IngestExternalFileOptions;
import org.rocksdb.Options;
import org.rocksdb.RocksDB;
import org.rocksdb.RocksIterator;
import org.rocksdb.SstFileWriter;

public class ExternalSstFiles {

    /** A key of key group 0 (a 1-byte prefix, as Flink's of max parallelism <= 128). */
    private static byte[] key(String name) {
        return ("\0" + name).getBytes(StandardCharsets.UTF_8);
    }

    private static byte[] value(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        RocksDB.loadLibrary();
        Path out = Path.of(args[0]);
        database(out.resolve("written"), true);
        database(out.resolve("manifest-only"), false);
    }

    /**
     * Writes k1..k3 and flushes (sequences 1..3), ingests a file overwriting k2, deleting k3 and
     * adding k4 (it overlaps the flushed keys, so RocksDB gives it sequence 4), then overwrites k4
     * and flushes again: the ingested file is neither the oldest nor the newest.
     */
    private static void database(Path dir, boolean writeGlobalSeqno) throws Exception {
        Files.createDirectories(dir);
        Path external = dir.resolveSibling(dir.getFileName() + "-external.sst");
        try (Options options = new Options().setCreateIfMissing(true)
                        .setCompressionType(CompressionType.NO_COMPRESSION);
                FlushOptions flush = new FlushOptions().setWaitForFlush(true);
                RocksDB db = RocksDB.open(options, dir.resolve("db").toString())) {
            db.put(key("k1"), value("old1"));
            db.put(key("k2"), value("old2"));
            db.put(key("k3"), value("old3"));
            db.flush(flush);
            try (EnvOptions env = new EnvOptions(); SstFileWriter writer = new SstFileWriter(env, options)) {
                writer.open(external.toString());
                writer.put(key("k2"), value("ingested2"));
                writer.delete(key("k3"));
                writer.put(key("k4"), value("ingested4"));
                writer.finish();
            }
            try (IngestExternalFileOptions ingest = new IngestExternalFileOptions()) {
                ingest.setMoveFiles(false);
                ingest.setAllowGlobalSeqNo(true);
                ingest.setWriteGlobalSeqno(writeGlobalSeqno);
                db.ingestExternalFile(List.of(external.toString()), ingest);
            }
            db.put(key("k4"), value("newest4"));
            db.flush(flush);
            List<String> lines = new ArrayList<>();
            try (RocksIterator it = db.newIterator()) {
                for (it.seekToFirst(); it.isValid(); it.next()) {
                    lines.add(HexFormat.of().formatHex(it.key()) + "\t" + HexFormat.of().formatHex(it.value()));
                }
            }
            Files.write(dir.resolve("truth.txt"), lines);
        }
        Files.delete(external);
    }
}
