//! Tests of the free staging buffers and their growth.

use super::*;

fn buffer() -> StagingBuffer {
    StagingBuffer::Host {
        buf: vec![0; 8],
        start: 0,
        len: 8,
    }
}

/// A pool of one buffer that may grow to `limit`, with the allocator
/// played by the test: (pool, where buffers come back, growth asked).
fn pool(limit: usize) -> (FreeBuffers, Sender<StagingBuffer>, Orders) {
    let (free_tx, free_rx) = channel();
    let (growth, orders) = growth();
    free_tx.send(buffer()).unwrap();
    (
        FreeBuffers::new(free_rx, Some(growth), limit - 1),
        free_tx,
        orders,
    )
}

/// Answers every request for growth with a new buffer; how many.
fn allocate(orders: &Orders, free: &Sender<StagingBuffer>) -> usize {
    orders
        .asked
        .try_iter()
        .map(|()| {
            orders.made_one();
            free.send(buffer()).unwrap()
        })
        .count()
}

/// `rounds` takes by a writer that keeps every buffer it gets (the
/// pipeline gives none back), each answered by the allocator: the buffers
/// it got.
fn take_and_keep(
    pool: &mut FreeBuffers,
    asked: &Orders,
    free: &Sender<StagingBuffer>,
    rounds: usize,
) -> Vec<StagingBuffer> {
    let mut held = Vec::new();
    for _ in 0..rounds {
        if let Some(buf) = pool.try_take().ok().flatten() {
            held.push(buf);
        }
        allocate(asked, free);
    }
    held
}

#[test]
fn a_writer_that_retries_while_a_buffer_is_on_its_way_asks_for_no_more() {
    let (mut pool, free, asked) = pool(16);
    let first = pool.try_take().ok().flatten().expect("the first buffer");
    // The buffer ahead, asked for at create, takes its time: the
    // writer, done with the first, retries many times meanwhile.
    for _ in 0..50 {
        assert!(pool.try_take().ok().flatten().is_none());
    }
    assert!(pool
        .take_within(Duration::from_millis(1))
        .ok()
        .flatten()
        .is_none());
    assert_eq!(
        allocate(&asked, &free),
        1,
        "one buffer asked for, not one per retry"
    );
    let second = pool.try_take().ok().flatten().expect("the buffer ahead");
    assert_eq!(allocate(&asked, &free), 1, "the next one ahead");
    // Taken while waiting: the one after is asked for as it arrives.
    drop((first, second));
    assert!(pool
        .take_within(Duration::from_millis(1))
        .ok()
        .flatten()
        .is_some());
    assert_eq!(allocate(&asked, &free), 1);
    assert_eq!(pool.had, 4);
}

#[test]
fn a_writer_the_pipeline_keeps_up_with_settles_at_three_buffers() {
    let (mut pool, free, asked) = pool(16);
    let mut made = 1 + allocate(&asked, &free);
    assert_eq!(made, 2, "one buffer ahead is asked for at create");
    // Each buffer the writer fills is compressed and back before the
    // writer needs the next but one.
    let mut compressing: Option<StagingBuffer> = None;
    for _ in 0..100 {
        let buf = pool.try_take().ok().flatten().expect("never waits");
        if let Some(done) = compressing.replace(buf) {
            free.send(done).unwrap();
        }
        made += allocate(&asked, &free);
    }
    assert_eq!(made, 3);
}

#[test]
fn a_writer_that_outruns_the_pipeline_grows_it_to_the_budget_and_no_further() {
    let (mut pool, free, asked) = pool(5);
    let mut held = Vec::new();
    for _ in 0..20 {
        if let Some(buf) = pool.try_take().ok().flatten() {
            held.push(buf); // never given back
        }
        allocate(&asked, &free);
    }
    assert_eq!(held.len(), 5);
    assert_eq!(allocate(&asked, &free), 0);
    assert!(pool.try_take().ok().flatten().is_none());
}

#[test]
fn a_writer_that_waits_grows_it_only_as_far_as_keeps_the_pipeline_busy() {
    let (mut pool, free, asked) = pool(16);
    pool.set_writer(Writer::Waits);
    // The pipeline is slower: none comes back.
    let mut held = take_and_keep(&mut pool, &asked, &free, 20);
    assert_eq!(held.len(), 2, "one filled, one compressed");
    // Its waits ask for no more either.
    for _ in 0..5 {
        assert!(pool
            .take_within(Duration::from_millis(1))
            .ok()
            .flatten()
            .is_none());
        assert_eq!(allocate(&asked, &free), 0);
    }
    // Two other arrays hold buffers with partial epochs: one more each.
    pool.set_held(2);
    held.extend(take_and_keep(&mut pool, &asked, &free, 20));
    assert_eq!(held.len(), 4);
    // A writer that cannot wait (a camera's burst) takes the rest.
    pool.set_writer(Writer::CannotWait);
    held.extend(take_and_keep(&mut pool, &asked, &free, 20));
    assert_eq!(held.len(), 16, "the whole budget");
}

#[test]
fn a_waiting_writer_of_a_lane_of_small_buffers_keeps_two_batches_busy() {
    // A lane of many arrays whose backend's batch gathers four of its
    // buffers: a waiting writer holds two batches' worth, not two buffers
    // (two buffers would make every batch one buffer long).
    let (lane, free, asked) = pool(16);
    let mut lane = lane.with_batch_buffers(4);
    lane.set_writer(Writer::Waits);
    let held = take_and_keep(&mut lane, &asked, &free, 40);
    assert_eq!(held.len(), 8, "a batch filled, a batch compressed");
    // The budget still bounds it.
    let (bounded, free, asked) = pool(16);
    let mut bounded = bounded.with_budget(6).with_batch_buffers(4);
    bounded.set_writer(Writer::Waits);
    assert_eq!(take_and_keep(&mut bounded, &asked, &free, 40).len(), 6);
}

/// A waiting writer's pool after `rounds` of: fill the buffer in hand, hand
/// it on and take the next. In a round of `writer_waits` the pipeline is
/// still compressing the buffer handed on the round before, and the writer
/// waits for it; in the others it is done with all but the one just
/// handed on. With `slow_allocator`, the buffer asked for ahead at create
/// is made only after the writer's first try for it. Returns the buffers
/// made.
fn waiting_writer_rounds(
    rounds: usize,
    slow_allocator: bool,
    writer_waits: impl Fn(usize) -> bool,
) -> usize {
    let (mut pool, free, asked) = pool(16);
    pool.set_writer(Writer::Waits);
    let mut made = 1;
    if !slow_allocator {
        made += allocate(&asked, &free);
    }
    let mut in_hand = pool.try_take().ok().flatten().expect("the first buffer");
    let mut compressing: VecDeque<StagingBuffer> = VecDeque::new();
    for round in 0..rounds {
        compressing.push_back(in_hand);
        while compressing.len() > 1 + usize::from(writer_waits(round)) {
            free.send(compressing.pop_front().unwrap()).unwrap();
        }
        in_hand = match pool.try_take().ok().flatten() {
            Some(buf) => buf,
            None => {
                // The allocator (the first round) or the pipeline gives it
                // while the writer waits.
                made += allocate(&asked, &free);
                if round > 0 {
                    let done = compressing.pop_front().expect("one is compressing");
                    free.send(done).unwrap();
                }
                let waited = pool.take_within(Duration::from_secs(5));
                waited.ok().flatten().expect("a buffer came")
            }
        };
        made += allocate(&asked, &free);
    }
    made
}

#[test]
fn a_waiting_writer_gets_a_buffer_ahead_only_once_each_side_has_waited() {
    // The pipeline slower at every take, or the writer slower at every
    // take: a buffer ahead would end the stream no sooner.
    assert_eq!(waiting_writer_rounds(40, false, |_| true), 2);
    assert_eq!(waiting_writer_rounds(40, false, |_| false), 2);
    // Both sides wait in turn (about the same rates): one ahead.
    assert_eq!(waiting_writer_rounds(40, false, |r| r % 3 == 0), 3);
    assert_eq!(waiting_writer_rounds(40, false, |r| r == 30), 3);
    // A wait for the allocator's first buffer says nothing of the
    // pipeline.
    assert_eq!(waiting_writer_rounds(40, true, |_| false), 2);
}

#[test]
fn past_the_budget_only_while_partial_epochs_hold_the_buffers() {
    let (pool, free, asked) = pool(8);
    let mut pool = pool.with_budget(3);
    let mut held = Vec::new();
    for _ in 0..20 {
        if let Some(buf) = pool.try_take().ok().flatten() {
            held.push(buf);
        }
        allocate(&asked, &free);
    }
    assert_eq!(
        held.len(),
        3,
        "a writer that outruns the pipeline stays in the budget"
    );
    // Two arrays hold buffers with partial epochs: one more may come.
    pool.set_held(2);
    for _ in 0..20 {
        if let Some(buf) = pool.try_take().ok().flatten() {
            held.push(buf);
            pool.set_held(held.len());
        }
        allocate(&asked, &free);
    }
    assert_eq!(held.len(), 8, "up to the lane's limit");
    assert_eq!(allocate(&asked, &free), 0);
}

#[test]
fn buffers_that_stay_free_for_a_window_go_and_come_back_when_needed() {
    let window = Duration::from_millis(40);
    let (pool, free, asked) = pool(8);
    let mut pool = pool.with_shrink_window(window);
    // A burst: the writer outruns the pipeline and the pool grows to 8.
    let mut held = Vec::new();
    for _ in 0..20 {
        if let Some(buf) = pool.try_take().ok().flatten() {
            held.push(buf);
        }
        allocate(&asked, &free);
    }
    assert_eq!(held.len(), 8);
    held.drain(..).for_each(|b| free.send(b).unwrap());
    // Then a slow input: each buffer is back long before the next is
    // needed, so seven stay free all along. The window that saw the burst
    // ends first; the next one, all idle, ends at the first take after it.
    // Until then, however late a busy machine runs this thread, nothing
    // goes; the bound only ends a test that never shrinks.
    let start = Instant::now();
    while pool.had > SHRINK_FLOOR && start.elapsed() < 50 * window {
        let before = pool.had;
        let buf = pool.try_take().ok().flatten().expect("buffers are free");
        if pool.had < before {
            assert!(start.elapsed() >= window, "a buffer went within a window");
        }
        free.send(buf).unwrap();
        assert_eq!(allocate(&asked, &free), 0, "nothing new while idle");
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(pool.had, SHRINK_FLOOR, "all but the floor went");
    // A steady input that keeps two in use (one filled, one being
    // compressed) and one free ahead grows it to three and keeps them.
    let mut compressing: Option<StagingBuffer> = None;
    let start = Instant::now();
    while start.elapsed() < 2 * window + Duration::from_millis(10) {
        let buf = pool.try_take().ok().flatten().expect("never waits");
        if let Some(done) = compressing.replace(buf) {
            free.send(done).unwrap();
        }
        allocate(&asked, &free);
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(pool.had, 3, "a buffer in use is never counted idle");
    // Another burst grows it back to the limit.
    for _ in 0..20 {
        if let Some(buf) = pool.try_take().ok().flatten() {
            held.push(buf);
        }
        allocate(&asked, &free);
    }
    assert_eq!(held.len() + usize::from(compressing.is_some()), 8);
}

#[test]
fn no_growth_after_it_stopped_and_an_ended_pipeline_says_so() {
    let (mut pool, free, asked) = pool(4);
    allocate(&asked, &free);
    pool.stop_growing();
    assert!(pool.try_take().ok().flatten().is_some());
    assert!(pool.try_take().ok().flatten().is_some());
    assert_eq!(allocate(&asked, &free), 0, "nothing asked once stopped");
    drop(free);
    assert!(pool.try_take().is_err());
    assert!(pool.take_within(Duration::from_millis(1)).is_err());
}

#[test]
fn a_wait_at_create_ends_when_the_allocator_gives_up() {
    // The buffer ahead is made while create waits for it.
    let (mut waiting, free, asked) = pool(4);
    let maker = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        allocate(&asked, &free);
        (asked, free)
    });
    waiting
        .wait_until_free(2, Duration::from_secs(5))
        .ok()
        .expect("the pipeline is there");
    assert_eq!(waiting.ready.len(), 2, "the buffer ahead came");
    let (_asked, _free) = maker.join().unwrap();

    // The allocator cannot make it (its thread ends): the wait does
    // not last its whole bound, and the stream goes on with what it
    // has, asking for no more.
    let (mut pool, free, asked) = pool(4);
    drop(asked);
    let start = Instant::now();
    pool.wait_until_free(2, Duration::from_secs(5))
        .ok()
        .expect("the pipeline is there");
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    assert_eq!((pool.ready.len(), pool.had), (1, 1));
    let only = pool.try_take().ok().flatten().expect("the first buffer");
    assert!(pool.try_take().ok().flatten().is_none());
    free.send(only).unwrap();
    assert!(pool.try_take().ok().flatten().is_some(), "it is reused");
}
