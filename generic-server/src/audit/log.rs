//! The log backend: audit events as JSON lines, to a file rotated as
//! kube-apiserver's (lumberjack's) is, or to standard output. Requests only
//! hand events to a bounded queue; one writer thread does the IO, so a slow
//! disk delays the log, never a request. Events that find the queue full are
//! dropped and counted in the server's log.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError};
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::Backend;

/// lumberjack's default largest size, when `--audit-log-maxsize` is 0.
const DEFAULT_MAX_MEGABYTES: u64 = 100;
/// A megabyte, as lumberjack counts it.
const MEGABYTE: u64 = 1024 * 1024;

/// When the log is rotated and which old logs are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// The largest size of the log before it is rotated.
    pub max_bytes: u64,
    /// How many rotated logs are kept (0: all).
    pub max_backups: usize,
    /// How long rotated logs are kept (`None`: forever).
    pub max_age: Option<Duration>,
}

impl Rotation {
    /// From kube's flags: megabytes (0 means 100), a count, days.
    pub fn from_flags(max_size_mb: u64, max_backups: usize, max_age_days: u64) -> Rotation {
        let megabytes = if max_size_mb == 0 {
            DEFAULT_MAX_MEGABYTES
        } else {
            max_size_mb
        };
        Rotation {
            max_bytes: megabytes.saturating_mul(MEGABYTE),
            max_backups,
            max_age: (max_age_days > 0).then(|| Duration::from_secs(max_age_days * 24 * 3600)),
        }
    }
}

/// The JSON-lines backend.
pub struct LogBackend {
    queue: SyncSender<Bytes>,
    dropped: Arc<AtomicU64>,
}

impl LogBackend {
    /// Starts the writer for `path` (`-`: standard output), holding at most
    /// `buffer` events; the file is opened (or created) now, so a bad path
    /// stops the server at start.
    pub fn start(path: &str, rotation: Rotation, buffer: usize) -> crate::Result<LogBackend> {
        let sink: Box<dyn LineSink> = if path == "-" {
            Box::new(std::io::stdout())
        } else {
            let mut file = RotatingFile::new(PathBuf::from(path), rotation);
            file.open()
                .map_err(|e| crate::Error::Audit(format!("opening the audit log {path}: {e}")))?;
            Box::new(file)
        };
        Self::with_sink(sink, buffer)
    }

    /// Starts the writer thread for `sink`.
    fn with_sink(sink: Box<dyn LineSink>, buffer: usize) -> crate::Result<LogBackend> {
        let (queue, events) = std::sync::mpsc::sync_channel(buffer.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        let counted = dropped.clone();
        std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || write_events(events, sink, counted))
            .map_err(|e| crate::Error::Audit(format!("starting the audit log writer: {e}")))?;
        Ok(LogBackend { queue, dropped })
    }
}

impl Backend for LogBackend {
    fn process(&self, event: Bytes) {
        if let Err(TrySendError::Full(_)) = self.queue.try_send(event) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Where the writer puts lines.
trait LineSink: Send {
    /// Writes one line (with its newline).
    fn write_line(&mut self, line: &[u8]) -> std::io::Result<()>;
    /// Flushes what is buffered.
    fn flush_lines(&mut self) -> std::io::Result<()>;
}

impl LineSink for std::io::Stdout {
    fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.lock().write_all(line)
    }

    fn flush_lines(&mut self) -> std::io::Result<()> {
        self.lock().flush()
    }
}

/// How long the writer lets events gather while they keep coming: under
/// load it takes them in batches, one write each, and requests never wake it.
const GATHER: Duration = Duration::from_millis(20);

/// The writer thread: woken by the first event after a quiet spell, then
/// taking what gathered every [`GATHER`] until a spell brings nothing.
fn write_events(events: Receiver<Bytes>, sink: Box<dyn LineSink>, dropped: Arc<AtomicU64>) {
    let mut writer = Writer {
        sink,
        line: Vec::with_capacity(4096),
        failing: false,
    };
    while let Ok(first) = events.recv() {
        writer.write(&first);
        loop {
            while let Ok(event) = events.try_recv() {
                writer.write(&event);
            }
            writer.flush();
            let lost = dropped.swap(0, Ordering::Relaxed);
            if lost > 0 {
                tracing::warn!(
                    dropped = lost,
                    "Error in audit plugin 'log' affecting {lost} audit events: audit buffer queue blocked"
                );
            }
            std::thread::sleep(GATHER);
            match events.try_recv() {
                Ok(event) => writer.write(&event),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return,
            }
        }
    }
}

/// Serializes events into lines for a sink, reporting the first failure of a run.
struct Writer {
    sink: Box<dyn LineSink>,
    line: Vec<u8>,
    failing: bool,
}

impl Writer {
    fn write(&mut self, event: &[u8]) {
        self.line.clear();
        self.line.extend_from_slice(event);
        self.line.push(b'\n');
        let written = self.sink.write_line(&self.line);
        match written {
            Ok(()) => self.failing = false,
            Err(e) if !self.failing => {
                self.failing = true;
                tracing::error!(error = %e, "Error in audit plugin 'log': writing the audit log");
            }
            Err(_) => {}
        }
    }

    fn flush(&mut self) {
        if let Err(e) = self.sink.flush_lines() {
            tracing::error!(error = %e, "Error in audit plugin 'log': flushing the audit log");
        }
    }
}

/// A log file rotated as lumberjack rotates it: past its size it is renamed
/// `<name>-<UTC time as 2006-01-02T15-04-05.000>.<ext>` and a new one begun;
/// rotated files beyond the count or the age kept are removed.
pub struct RotatingFile {
    path: PathBuf,
    rotation: Rotation,
    file: Option<BufWriter<File>>,
    size: u64,
}

impl RotatingFile {
    /// A log at `path`, opened on first write.
    pub fn new(path: PathBuf, rotation: Rotation) -> RotatingFile {
        RotatingFile {
            path,
            rotation,
            file: None,
            size: 0,
        }
    }

    /// Opens the log to append to it, creating it 0600 and a missing
    /// directory 0700, as kube does: the log holds who did what, and may
    /// hold request bodies.
    pub fn open(&mut self) -> std::io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&self.path)?;
        self.size = file.metadata()?.len();
        self.file = Some(BufWriter::new(file));
        Ok(())
    }

    /// Writes a line, rotating first if it would take the log past its size.
    pub fn write(&mut self, line: &[u8]) -> std::io::Result<()> {
        if self.file.is_none() {
            self.open()?;
        }
        let len = line.len() as u64;
        if self.size > 0 && self.size + len > self.rotation.max_bytes {
            self.rotate()?;
        }
        if let Some(file) = self.file.as_mut() {
            file.write_all(line)?;
            self.size += len;
        }
        Ok(())
    }

    /// Renames the log to its backup name, begins a new one, and removes
    /// the backups no longer kept.
    pub fn rotate(&mut self) -> std::io::Result<()> {
        if let Some(mut file) = self.file.take() {
            file.flush()?;
        }
        if self.path.exists() {
            let mut at = time::OffsetDateTime::now_utc();
            let mut backup = backup_path(&self.path, at);
            // Two rotations within a millisecond must not overwrite a backup.
            while backup.exists() {
                at += time::Duration::milliseconds(1);
                backup = backup_path(&self.path, at);
            }
            std::fs::rename(&self.path, &backup)?;
        }
        self.open()?;
        self.size = 0;
        if let Err(e) = self.remove_old_backups(SystemTime::now()) {
            tracing::warn!(error = %e, "removing old audit logs");
        }
        Ok(())
    }

    /// The rotated logs, newest first.
    pub fn backups(&self) -> std::io::Result<Vec<(PathBuf, time::OffsetDateTime)>> {
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let (prefix, ext) = name_parts(&self.path);
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(at) = backup_time(&name, &prefix, &ext) {
                found.push((entry.path(), at));
            }
        }
        found.sort_by_key(|b| std::cmp::Reverse(b.1));
        Ok(found)
    }

    /// Removes rotated logs beyond `max_backups` or older than `max_age`.
    fn remove_old_backups(&self, now: SystemTime) -> std::io::Result<()> {
        let now = time::OffsetDateTime::from(now);
        for (i, (path, at)) in self.backups()?.into_iter().enumerate() {
            let too_many = self.rotation.max_backups > 0 && i >= self.rotation.max_backups;
            let too_old = self
                .rotation
                .max_age
                .is_some_and(|age| now - at > time::Duration::seconds(age.as_secs() as i64));
            if too_many || too_old {
                std::fs::remove_file(path)?;
            }
        }
        Ok(())
    }
}

impl LineSink for RotatingFile {
    fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.write(line)
    }

    fn flush_lines(&mut self) -> std::io::Result<()> {
        match self.file.as_mut() {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

/// lumberjack's time format of backups: `2006-01-02T15-04-05.000`, UTC.
const BACKUP_TIME: &[time::format_description::FormatItem<'static>] = time::macros::format_description!(
    "[year]-[month]-[day]T[hour]-[minute]-[second].[subsecond digits:3]"
);

/// A log's name split as lumberjack splits it: `audit` and `.log`.
fn name_parts(path: &Path) -> (String, String) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.rfind('.').filter(|i| *i > 0) {
        Some(dot) => (name[..dot].to_string(), name[dot..].to_string()),
        None => (name, String::new()),
    }
}

/// The path a log rotated at `at` is renamed to: `audit-2026-12-02T20-21-40.123.log`.
pub fn backup_path(path: &Path, at: time::OffsetDateTime) -> PathBuf {
    let (prefix, ext) = name_parts(path);
    let stamp = at
        .to_offset(time::UtcOffset::UTC)
        .format(BACKUP_TIME)
        .unwrap_or_default();
    path.with_file_name(format!("{prefix}-{stamp}{ext}"))
}

/// When the backup named `name` was rotated, if it is one of the log `prefix`/`ext`'s.
fn backup_time(name: &str, prefix: &str, ext: &str) -> Option<time::OffsetDateTime> {
    let stamp = name
        .strip_prefix(prefix)?
        .strip_prefix('-')?
        .strip_suffix(ext)?;
    time::PrimitiveDateTime::parse(stamp, BACKUP_TIME)
        .ok()
        .map(time::PrimitiveDateTime::assume_utc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("audit-log-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn backups_are_named_as_lumberjack_names_them() {
        let at = time::macros::datetime!(2026-12-02 20:21:40.123456 UTC);
        let backup = backup_path(Path::new("/var/log/audit.log"), at);
        assert_eq!(
            backup,
            Path::new("/var/log/audit-2026-12-02T20-21-40.123.log")
        );
        assert_eq!(
            backup_time("audit-2026-12-02T20-21-40.123.log", "audit", ".log"),
            Some(time::macros::datetime!(2026-12-02 20:21:40.123 UTC))
        );
        assert_eq!(backup_time("audit.log", "audit", ".log"), None);
        assert_eq!(
            backup_time("other-2026-12-02T20-21-40.123.log", "audit", ".log"),
            None
        );
        assert_eq!(
            backup_path(Path::new("audit"), at),
            Path::new("audit-2026-12-02T20-21-40.123")
        );
    }

    #[test]
    fn a_new_log_and_its_new_directory_are_private_to_the_server() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir();
        let path = dir.join("made/for/audit.log");
        let mut log = RotatingFile::new(path.clone(), Rotation::from_flags(1, 0, 0));
        log.write(b"line\n").unwrap();
        log.rotate().unwrap();
        log.write(b"next\n").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(mode(&dir.join("made")), 0o700);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_log_rotates_past_its_size_and_keeps_max_backups() {
        let dir = temp_dir();
        let path = dir.join("audit.log");
        let rotation = Rotation {
            max_bytes: 100,
            max_backups: 2,
            max_age: None,
        };
        let mut log = RotatingFile::new(path.clone(), rotation);
        let line = [b'x'; 39];
        for _ in 0..2 {
            log.write(&line).unwrap();
        }
        log.flush_lines().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 78);
        assert!(log.backups().unwrap().is_empty());
        // A third line would make 117 bytes: the log is rotated first.
        log.write(&line).unwrap();
        log.flush_lines().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 39);
        let backups = log.backups().unwrap();
        assert_eq!(backups.len(), 1);
        assert_eq!(std::fs::metadata(&backups[0].0).unwrap().len(), 78);
        for _ in 0..10 {
            log.write(&[b'y'; 60]).unwrap();
        }
        let backups = log.backups().unwrap();
        assert_eq!(backups.len(), 2, "only max_backups are kept: {backups:?}");
        assert!(backups[0].1 > backups[1].1, "newest first");
        // A reopened log appends to what is there.
        log.flush_lines().unwrap();
        let size = std::fs::metadata(&path).unwrap().len();
        let mut again = RotatingFile::new(path.clone(), rotation);
        again.write(b"z\n").unwrap();
        again.flush_lines().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size + 2);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn backups_older_than_max_age_are_removed() {
        let dir = temp_dir();
        let path = dir.join("audit.log");
        let old = time::OffsetDateTime::now_utc() - time::Duration::days(3);
        std::fs::write(backup_path(&path, old), "old\n").unwrap();
        let recent = time::OffsetDateTime::now_utc() - time::Duration::hours(1);
        std::fs::write(backup_path(&path, recent), "recent\n").unwrap();
        std::fs::write(dir.join("unrelated.log"), "keep\n").unwrap();
        let mut log = RotatingFile::new(path.clone(), Rotation::from_flags(1, 0, 2));
        log.write(b"line\n").unwrap();
        log.rotate().unwrap();
        let kept: Vec<PathBuf> = log.backups().unwrap().into_iter().map(|b| b.0).collect();
        assert_eq!(kept.len(), 2, "{kept:?}");
        assert!(!backup_path(&path, old).exists());
        assert!(backup_path(&path, recent).exists());
        assert!(dir.join("unrelated.log").exists());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn flags_as_kube_reads_them() {
        let rotation = Rotation::from_flags(0, 0, 0);
        assert_eq!(rotation.max_bytes, 100 * MEGABYTE);
        assert_eq!(rotation.max_age, None);
        assert_eq!(
            Rotation::from_flags(2, 3, 1).max_age,
            Some(Duration::from_secs(86400))
        );
    }

    /// Takes 10 ms a line, as a slow disk might.
    struct Slow(Arc<std::sync::Mutex<Vec<Vec<u8>>>>);

    impl LineSink for Slow {
        fn write_line(&mut self, line: &[u8]) -> std::io::Result<()> {
            std::thread::sleep(Duration::from_millis(10));
            self.0.lock().unwrap().push(line.to_vec());
            Ok(())
        }

        fn flush_lines(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_slow_disk_never_blocks_requests_and_drops_are_counted() {
        let written = Arc::new(std::sync::Mutex::new(Vec::new()));
        let backend = LogBackend::with_sink(Box::new(Slow(written.clone())), 4).unwrap();
        let event = Bytes::from(
            serde_json::to_vec(&apimachinery::audit::Event::new(
                apimachinery::audit::Level::Metadata,
                "id".into(),
                "t",
            ))
            .unwrap(),
        );
        let started = std::time::Instant::now();
        for _ in 0..100 {
            backend.process(event.clone());
        }
        let dropped = backend.dropped.load(Ordering::Relaxed);
        assert!(
            started.elapsed() < Duration::from_millis(100),
            "{:?}",
            started.elapsed()
        );
        assert!(dropped >= 90, "dropped {dropped}");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while written.lock().unwrap().len() as u64 + dropped < 100 {
            assert!(
                std::time::Instant::now() < deadline,
                "the queued events were not written"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let lines = written.lock().unwrap();
        assert_eq!(lines.len() as u64 + dropped, 100);
        let first: serde_json::Value = serde_json::from_slice(&lines[0]).unwrap();
        assert_eq!(first["auditID"], "id");
        assert!(lines[0].ends_with(b"\n"));
    }
}
