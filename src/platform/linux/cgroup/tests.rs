use super::*;

/// `/proc/self/cgroup` of a process in v1 memory cgroup `/jobs/one`, and
/// in the v2 hierarchy at `/`, as on a machine that mounts both.
const HYBRID_CGROUPS: &str = "9:name=systemd:/\n8:pids:/\n4:memory:/jobs/one\n1:cpu:/\n0::/\n";

/// A mountinfo line of a cgroup file system of `fs_type` with super
/// options `options`, showing cgroup `root` at `point`.
fn mount_line(root: &str, point: &Path, fs_type: &str, options: &str) -> String {
    format!(
        "35 31 0:32 {root} {} rw,relatime shared:12 - {fs_type} {fs_type} {options}\n",
        point.display()
    )
}

/// Writes a cgroup's memory files under `dir` (`None`: the file is left
/// out).
fn cgroup(dir: &Path, version: Version, limit: Option<&str>, usage: Option<u64>) {
    std::fs::create_dir_all(dir).unwrap();
    let files = version.files();
    if let Some(limit) = limit {
        std::fs::write(dir.join(files.limit), format!("{limit}\n")).unwrap();
    }
    if let Some(usage) = usage {
        std::fs::write(dir.join(files.usage), format!("{usage}\n")).unwrap();
    }
}

const V1_NONE: &str = "9223372036854771712";

#[test]
fn the_process_cgroup_is_read_for_each_hierarchy() {
    assert_eq!(
        cgroup_path(HYBRID_CGROUPS, Version::V1).as_deref(),
        Some("/jobs/one")
    );
    assert_eq!(
        cgroup_path(HYBRID_CGROUPS, Version::V2).as_deref(),
        Some("/")
    );
    // The memory controller mounted together with others.
    let shared = "3:cpu,memory,pids:/a/b\n";
    assert_eq!(cgroup_path(shared, Version::V1).as_deref(), Some("/a/b"));
    assert_eq!(cgroup_path(shared, Version::V2), None);
    // A path with a colon in it is kept whole.
    assert_eq!(
        cgroup_path("0::/a:b\n", Version::V2).as_deref(),
        Some("/a:b")
    );
    assert_eq!(cgroup_path("", Version::V1), None);
}

#[test]
fn memory_mounts_are_found_in_mountinfo() {
    let text = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                35 31 0:32 /docker/x /sys/fs/cgroup/memory rw,relatime shared:9 master:3 - cgroup cgroup rw,memory\n\
                40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n\
                41 31 0:38 / /sys/fs/cgroup/my\\040unified rw,relatime - cgroup2 cgroup2 rw\n";
    assert_eq!(
        mounts(text, Version::V1),
        [Mount {
            root: "/docker/x".into(),
            point: "/sys/fs/cgroup/memory".into()
        }]
    );
    assert_eq!(
        mounts(text, Version::V2),
        [Mount {
            root: "/".into(),
            point: "/sys/fs/cgroup/my unified".into()
        }]
    );
    assert_eq!(unescape("a\\134b\\011c\\9x\\"), "a\\b\tc\\9x\\");
}

#[test]
fn cgroup_limits_leave_headroom() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(level_headroom(dir.path(), Version::V2), None);
    std::fs::write(dir.path().join("memory.max"), "max\n").unwrap();
    std::fs::write(dir.path().join("memory.current"), "100\n").unwrap();
    assert_eq!(level_headroom(dir.path(), Version::V2), None);
    std::fs::write(dir.path().join("memory.max"), "1000\n").unwrap();
    assert_eq!(level_headroom(dir.path(), Version::V2), Some(900));
    // Page cache the kernel reclaims first is not counted as used.
    std::fs::write(
        dir.path().join("memory.stat"),
        "anon 40\nfile 60\nactive_file 10\ninactive_file 50\n",
    )
    .unwrap();
    assert_eq!(level_headroom(dir.path(), Version::V2), Some(950));
    // A limit whose usage cannot be read says nothing.
    std::fs::remove_file(dir.path().join("memory.current")).unwrap();
    assert_eq!(level_headroom(dir.path(), Version::V2), None);
}

#[test]
fn a_v1_limit_on_any_ancestor_counts() {
    let tree = tempfile::tempdir().unwrap();
    let point = tree.path().join("memory");
    let mountinfo = mount_line("/", &point, "cgroup", "rw,memory");
    let cgroups = "4:memory:/jobs/one\n";
    cgroup(&point, Version::V1, Some(V1_NONE), Some(5 << 30));
    cgroup(&point.join("jobs"), Version::V1, Some(V1_NONE), Some(300));
    cgroup(
        &point.join("jobs/one"),
        Version::V1,
        Some(V1_NONE),
        Some(200),
    );
    assert_eq!(headroom_of(cgroups, &mountinfo), None, "no limit anywhere");
    // The parent's limit holds the process's cgroup too.
    cgroup(&point.join("jobs"), Version::V1, Some("1000"), Some(300));
    assert_eq!(headroom_of(cgroups, &mountinfo), Some(700));
    // The smaller headroom of the two wins.
    cgroup(&point.join("jobs/one"), Version::V1, Some("900"), Some(200));
    assert_eq!(headroom_of(cgroups, &mountinfo), Some(700));
    cgroup(&point.join("jobs/one"), Version::V1, Some("250"), Some(200));
    assert_eq!(headroom_of(cgroups, &mountinfo), Some(50));
    // A limit on a sibling does not.
    cgroup(&point.join("jobs/two"), Version::V1, Some("10"), Some(5));
    assert_eq!(headroom_of(cgroups, &mountinfo), Some(50));
    // v1's hierarchical stat key is the one read.
    std::fs::write(
        point.join("jobs/one/memory.stat"),
        "inactive_file 1\ntotal_inactive_file 100\n",
    )
    .unwrap();
    assert_eq!(headroom_of(cgroups, &mountinfo), Some(150));
}

#[test]
fn a_v2_limit_on_any_ancestor_counts() {
    let tree = tempfile::tempdir().unwrap();
    let point = tree.path().join("unified");
    let mountinfo = mount_line("/", &point, "cgroup2", "rw,nsdelegate");
    let cgroups = "0::/user.slice/app.service\n";
    // The root has no memory.max in v2.
    cgroup(&point, Version::V2, None, Some(5 << 30));
    cgroup(
        &point.join("user.slice"),
        Version::V2,
        Some("4000"),
        Some(1000),
    );
    cgroup(
        &point.join("user.slice/app.service"),
        Version::V2,
        Some("max"),
        Some(500),
    );
    assert_eq!(headroom_of(cgroups, &mountinfo), Some(3000));
    cgroup(
        &point.join("user.slice/app.service"),
        Version::V2,
        Some("2000"),
        Some(500),
    );
    assert_eq!(headroom_of(cgroups, &mountinfo), Some(1500));
}

#[test]
fn both_hierarchies_count_on_a_hybrid_machine() {
    let tree = tempfile::tempdir().unwrap();
    let v1 = tree.path().join("memory");
    let v2 = tree.path().join("unified");
    let mountinfo =
        mount_line("/", &v1, "cgroup", "rw,memory") + &mount_line("/", &v2, "cgroup2", "rw");
    cgroup(&v1.join("jobs/one"), Version::V1, Some("1000"), Some(100));
    // The v2 hierarchy without the memory controller: no memory files.
    std::fs::create_dir_all(&v2).unwrap();
    assert_eq!(headroom_of(HYBRID_CGROUPS, &mountinfo), Some(900));
    cgroup(&v2, Version::V2, Some("500"), Some(100));
    assert_eq!(headroom_of(HYBRID_CGROUPS, &mountinfo), Some(400));
}

#[test]
fn a_container_sees_its_own_cgroup_at_the_mount_point() {
    let tree = tempfile::tempdir().unwrap();
    let point = tree.path().join("memory");
    cgroup(&point, Version::V1, Some("2000"), Some(500));
    // Without a cgroup namespace: the mount shows the container's cgroup.
    let mountinfo = mount_line("/docker/abc", &point, "cgroup", "rw,memory");
    assert_eq!(
        headroom_of("4:memory:/docker/abc\n", &mountinfo),
        Some(1500)
    );
    // In a cgroup namespace the process's cgroup reads `/`...
    let own = mount_line("/", &point, "cgroup", "rw,memory");
    assert_eq!(headroom_of("4:memory:/\n", &own), Some(1500));
    // ... also where the mount was made outside it, or the process was
    // moved out of the namespace's root.
    assert_eq!(headroom_of("4:memory:/\n", &mountinfo), Some(1500));
    assert_eq!(headroom_of("4:memory:/../sibling\n", &own), Some(1500));
}

#[test]
fn the_nearest_mount_above_the_cgroup_is_used() {
    let tree = tempfile::tempdir().unwrap();
    let whole = tree.path().join("whole");
    let part = tree.path().join("part");
    cgroup(&whole.join("a/b"), Version::V1, Some("1000"), Some(0));
    cgroup(&part.join("b"), Version::V1, Some("800"), Some(0));
    let mountinfo = mount_line("/", &whole, "cgroup", "rw,memory")
        + &mount_line("/a", &part, "cgroup", "rw,memory");
    let (folder, top) = cgroup_folder(&mountinfo, Version::V1, "/a/b").unwrap();
    assert_eq!((folder, top), (part.join("b"), part.clone()));
    assert_eq!(headroom_of("4:memory:/a/b\n", &mountinfo), Some(800));
}

#[test]
fn missing_files_mean_no_limit() {
    let tree = tempfile::tempdir().unwrap();
    let point = tree.path().join("memory");
    let mountinfo = mount_line("/", &point, "cgroup", "rw,memory");
    // No memory hierarchy in the process's cgroups, or none mounted.
    assert_eq!(headroom_of("1:cpu:/\n0::/\n", &mountinfo), None);
    assert_eq!(headroom_of(HYBRID_CGROUPS, ""), None);
    // The mount point or the process's folder is gone.
    assert_eq!(headroom_of("4:memory:/jobs/one\n", &mountinfo), None);
    std::fs::create_dir_all(point.join("jobs")).unwrap();
    assert_eq!(headroom_of("4:memory:/jobs/one\n", &mountinfo), None);
    // A level above the missing folder still counts.
    cgroup(&point.join("jobs"), Version::V1, Some("1000"), Some(10));
    assert_eq!(headroom_of("4:memory:/jobs/one\n", &mountinfo), Some(990));
}
