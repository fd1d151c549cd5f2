#!/usr/bin/env node
/*
 * kafkajs (2.2.4, pinned in package.json) against a rayka cluster, as a demanding kafkajs
 * user would drive it. Run by compat/run.py --kafkajs; alone:
 *
 *     node compat/kafkajs/check.js host:port[,host:port...]
 *
 * Steps (each under a deadline; the first failure stops the run):
 * - admin: createTopics (two topics, 3 partitions, replication factor 3, waitForLeaders),
 *   fetchTopicMetadata (3 partitions, 3 replicas each, leader in the ISR), describeCluster
 *   (the 3 brokers, a controller among them, a cluster id).
 * - an idempotent producer (acks -1) sends MESSAGES keyed messages in batches, every other
 *   batch GZIP-compressed; every partition gets some.
 * - consumer A of group G (eachMessage, autoCommit off) reads them all back: each exactly
 *   once, key / value / headers / timestamp intact, per partition offsets 0..n-1 with no gap and in the
 *   order they were sent; then it commits the next offsets (commitOffsets).
 * - admin fetchOffsets(G) equals the end offsets (fetchTopicOffsets), which sum to MESSAGES.
 * - consumer B joins G: a rebalance, after which A and B each own partitions (disjoint, all
 *   3 covered) and neither receives anything again (the commits hold).
 * - a transactional producer (transactionalId, maxInFlightRequests 1, idempotent) commits a
 *   transaction, aborts one, commits another (the last two also sendOffsets for a group); a
 *   readUncommitted: false consumer sees exactly the committed messages, a readUncommitted:
 *   true one every message; each partition's end offset is its records plus one control
 *   marker per transaction that touched it; the group's offset is the committed
 *   transaction's, not the aborted one's.
 * - admin deleteTopics; the topics leave listTopics.
 * Prints one JSON line (stdout) at the end, {"ok": true|false, ...}; exits 1 with
 * {"ok": false, "step": ..., "error": ...} on the first failed assertion or timeout.
 * kafkajs's own log (WARN and above; everything with KAFKAJS_CHECK_DEBUG=1) goes to stderr.
 */
'use strict'

const crypto = require('crypto')
const { Kafka, CompressionTypes, Partitioners, logLevel } = require('kafkajs')

const BROKERS = (process.argv[2] || '').split(',').filter(Boolean)
const MESSAGES = Number(process.env.KAFKAJS_CHECK_MESSAGES || 600)
const BATCH = 50
const STEP_TIMEOUT_MS = 90000         // any one step
const SETTLE_MS = 3000                // quiet time after the last expected message
const TXN_MESSAGES = 12               // per transaction

const started = Date.now()
const BASE_TIMESTAMP = started - 3600 * 1000   // CreateTime of message seq: this plus seq
const run = crypto.randomBytes(3).toString('hex')
const topic = `kjs-${run}`
const txnTopic = `kjs-txn-${run}`
const groupId = `kjs-group-${run}`
const out = { ok: false, kafkajs: require('kafkajs/package.json').version, brokers: BROKERS,
  messages: MESSAGES, steps: {} }
const recentLogs = []                 // kafkajs's last warnings/errors, for a failure report
const cleanup = []                    // disconnect callbacks, newest first

class CheckFailed extends Error {}

function check(cond, message) {
  if (!cond) throw new CheckFailed(message)
}

function withTimeout(promise, ms, what) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new CheckFailed(`timed out after ${ms} ms: ${what}`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

// polls cond() every 100 ms; fails with describe()'s state when ms pass first
async function waitFor(cond, ms, what, describe = () => '') {
  const deadline = Date.now() + ms
  for (;;) {
    if (cond()) return
    if (crashes.length) throw new CheckFailed(`consumer crashed while waiting for ${what}: ${crashes[0]}`)
    if (Date.now() > deadline) throw new CheckFailed(`timed out after ${ms} ms waiting for ${what} ${describe()}`)
    await sleep(100)
  }
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function step(name, fn, ms = STEP_TIMEOUT_MS) {
  const t0 = Date.now()
  try {
    const result = await withTimeout(Promise.resolve().then(fn), ms, name)
    out.steps[name] = (Date.now() - t0) / 1000
    return result
  } catch (e) {
    e.step = name
    throw e
  }
}

const logCreator = () => ({ namespace, level, label, log }) => {
  const line = `[kafkajs ${label}] ${namespace}: ${log.message}` +
    (log.error ? ` (${log.error})` : '')
  recentLogs.push(line)
  if (recentLogs.length > 20) recentLogs.shift()
  process.stderr.write(line + '\n')
}

const kafka = new Kafka({
  clientId: `rayka-compat-${run}`,
  brokers: BROKERS,
  logLevel: process.env.KAFKAJS_CHECK_DEBUG ? logLevel.DEBUG : logLevel.WARN,
  logCreator,
  connectionTimeout: 5000,
  requestTimeout: 30000,
})

const crashes = []

function newConsumer(opts) {
  const consumer = kafka.consumer({ heartbeatInterval: 1000, maxWaitTimeInMs: 500, ...opts })
  consumer.on(consumer.events.CRASH, e => crashes.push(`${e.payload.error}`))
  cleanup.unshift(() => consumer.disconnect())
  return consumer
}

const header = (headers, name) => (headers[name] === undefined ? undefined : String(headers[name]))

async function main() {
  check(BROKERS.length, 'usage: node check.js host:port[,host:port...]')
  const admin = kafka.admin()
  cleanup.unshift(() => admin.disconnect())
  await step('admin_connect', () => admin.connect())

  // -- admin: topics and the cluster ---------------------------------------------------------
  await step('create_topics', async () => {
    const created = await admin.createTopics({
      topics: [topic, txnTopic].map(t => ({ topic: t, numPartitions: 3, replicationFactor: 3 })),
      waitForLeaders: true,
      timeout: 30000,
    })
    check(created === true, `createTopics returned ${created}: the topics already existed?`)
  })

  const cluster = await step('describe_cluster', () => admin.describeCluster())
  const nodeIds = cluster.brokers.map(b => b.nodeId)
  check(cluster.brokers.length === 3 && new Set(nodeIds).size === 3,
    `describeCluster: expected 3 distinct brokers, got ${JSON.stringify(cluster.brokers)}`)
  check(nodeIds.includes(cluster.controller),
    `describeCluster: controller ${cluster.controller} is none of the brokers ${nodeIds}`)
  check(typeof cluster.clusterId === 'string' && cluster.clusterId.length > 0,
    `describeCluster: no cluster id (${cluster.clusterId})`)
  out.cluster = { brokers: nodeIds, controller: cluster.controller, clusterId: cluster.clusterId }

  await step('fetch_topic_metadata', async () => {
    const { topics } = await admin.fetchTopicMetadata({ topics: [topic, txnTopic] })
    check(topics.length === 2, `fetchTopicMetadata: expected 2 topics, got ${topics.map(t => t.name)}`)
    for (const t of topics) {
      const parts = [...t.partitions].sort((a, b) => a.partitionId - b.partitionId)
      check(parts.map(p => p.partitionId).join() === '0,1,2',
        `fetchTopicMetadata ${t.name}: partitions ${parts.map(p => p.partitionId)}, expected 0,1,2`)
      for (const p of parts) {
        check(p.partitionErrorCode === 0, `${t.name}/${p.partitionId}: error code ${p.partitionErrorCode}`)
        check(p.replicas.length === 3 && new Set(p.replicas).size === 3 &&
          p.replicas.every(r => nodeIds.includes(r)),
        `${t.name}/${p.partitionId}: replicas ${p.replicas}, expected the 3 brokers ${nodeIds}`)
        check(p.replicas.includes(p.leader) && p.isr.includes(p.leader),
          `${t.name}/${p.partitionId}: leader ${p.leader} not in replicas ${p.replicas} / isr ${p.isr}`)
      }
    }
  })

  // -- idempotent producer, keyed, part GZIP ---------------------------------------------------
  const sent = []                     // seq -> {key, value, headers, partition}
  const producedTo = { 0: 0, 1: 0, 2: 0 }
  let gzipped = 0
  const producer = kafka.producer({ idempotent: true, createPartitioner: Partitioners.DefaultPartitioner })
  cleanup.unshift(() => producer.disconnect())
  await step('produce', async () => {
    await producer.connect()
    for (let start = 0; start < MESSAGES; start += BATCH) {
      const messages = []
      for (let seq = start; seq < Math.min(start + BATCH, MESSAGES); seq++) {
        const m = {
          key: `key-${seq}`,
          value: JSON.stringify({ seq, text: 'x'.repeat(seq % 97), run }),
          headers: { 'x-seq': String(seq), 'x-source': 'kafkajs', 'x-empty': '' },
          timestamp: String(BASE_TIMESTAMP + seq),
        }
        sent[seq] = m
        messages.push(m)
      }
      const compression = (start / BATCH) % 2 ? CompressionTypes.GZIP : CompressionTypes.None
      if (compression === CompressionTypes.GZIP) gzipped += messages.length
      const meta = await producer.send({ topic, acks: -1, compression, messages })
      for (const r of meta) {
        check(r.errorCode === 0, `produce to ${r.topicName}/${r.partition}: error code ${r.errorCode}`)
      }
    }
  })
  out.gzip_messages = gzipped

  // -- consumer A reads everything, exactly once ----------------------------------------------
  const received = new Map()          // seq -> {partition, offset}
  const duplicates = []
  const problems = []
  const orderByPartition = { 0: [], 1: [], 2: [] }
  const eachMessage = who => async ({ topic: t, partition, message }) => {
    if (t !== topic) return problems.push(`${who} got a message from ${t}`)
    const seq = Number(header(message.headers, 'x-seq'))
    const expect = sent[seq]
    if (!expect) return problems.push(`${who}: unknown message at ${partition}@${message.offset}`)
    if (received.has(seq)) {
      duplicates.push({ who, seq, partition, offset: message.offset, first: received.get(seq) })
      return
    }
    received.set(seq, { who, partition, offset: Number(message.offset) })
    orderByPartition[partition].push({ seq, offset: Number(message.offset) })
    const key = message.key && message.key.toString()
    if (key !== expect.key) problems.push(`seq ${seq}: key ${key}, sent ${expect.key}`)
    if (String(message.value) !== expect.value) problems.push(`seq ${seq}: value differs`)
    if (message.timestamp !== expect.timestamp) {
      problems.push(`seq ${seq}: timestamp ${message.timestamp}, sent ${expect.timestamp}`)
    }
    for (const [name, value] of Object.entries(expect.headers)) {
      if (header(message.headers, name) !== value) {
        problems.push(`seq ${seq}: header ${name}=${header(message.headers, name)}, sent ${value}`)
      }
    }
    if (Object.keys(message.headers).length !== Object.keys(expect.headers).length) {
      problems.push(`seq ${seq}: headers ${Object.keys(message.headers)}`)
    }
  }

  const joins = { A: [], B: [] }      // the assignment of each GROUP_JOIN, in order
  const consumerA = newConsumer({ groupId })
  consumerA.on(consumerA.events.GROUP_JOIN, e => joins.A.push(e.payload.memberAssignment[topic] || []))
  await step('consume_all', async () => {
    await consumerA.connect()
    await consumerA.subscribe({ topics: [topic], fromBeginning: true })
    await consumerA.run({ autoCommit: false, eachMessage: eachMessage('A') })
    await waitFor(() => received.size + duplicates.length >= MESSAGES, STEP_TIMEOUT_MS - 10000,
      `all ${MESSAGES} messages`, () => `(got ${received.size}, ${duplicates.length} duplicates)`)
    await sleep(SETTLE_MS)            // anything more would be a duplicate
  })
  check(!problems.length, `consumed messages differ from those sent: ${problems.slice(0, 5).join('; ')}`)
  check(!duplicates.length, `${duplicates.length} messages delivered twice, e.g. ${JSON.stringify(duplicates[0])}`)
  check(received.size === MESSAGES, `received ${received.size} of ${MESSAGES}`)
  const counts = {}
  for (const [p, list] of Object.entries(orderByPartition)) {
    counts[p] = list.length
    list.forEach(({ seq, offset }, i) => {
      check(offset === i, `partition ${p}: offset ${offset} at position ${i} (a gap or reordering)`)
      check(i === 0 || seq > list[i - 1].seq,
        `partition ${p}: seq ${seq} after ${list[i - 1] && list[i - 1].seq} (out of send order)`)
    })
  }
  check(Object.values(counts).every(n => n > 0), `keys did not spread over 3 partitions: ${JSON.stringify(counts)}`)
  out.per_partition = counts

  await step('commit_offsets', () => consumerA.commitOffsets(
    Object.entries(orderByPartition).map(([p, list]) => ({ topic, partition: Number(p), offset: String(list.length) }))))

  await step('fetch_offsets', async () => {
    const [committed] = await admin.fetchOffsets({ groupId, topics: [topic] })
    const ends = await admin.fetchTopicOffsets(topic)
    const byPartition = Object.fromEntries(committed.partitions.map(p => [p.partition, p.offset]))
    let total = 0
    for (const end of ends) {
      check(String(byPartition[end.partition]) === String(end.high),
        `fetchOffsets ${groupId} ${topic}/${end.partition}: committed ${byPartition[end.partition]}, end offset ${end.high}`)
      check(Number(end.high) === counts[end.partition],
        `fetchTopicOffsets ${topic}/${end.partition}: end ${end.high}, consumed ${counts[end.partition]}`)
      check(Number(end.low) === 0, `fetchTopicOffsets ${topic}/${end.partition}: low ${end.low}`)
      total += Number(end.high)
    }
    check(ends.length === 3 && total === MESSAGES, `end offsets sum to ${total} over ${ends.length} partitions`)
    out.committed = byPartition
  })

  // -- consumer B joins: a rebalance splits the partitions ------------------------------------
  const consumerB = newConsumer({ groupId })
  consumerB.on(consumerB.events.GROUP_JOIN, e => joins.B.push(e.payload.memberAssignment[topic] || []))
  const split = () => {
    const a = joins.A[joins.A.length - 1] || []
    const b = joins.B[joins.B.length - 1] || []
    const all = [...a, ...b].sort()
    return a.length > 0 && b.length > 0 && all.join() === '0,1,2' && joins.A.length >= 2
  }
  await step('rebalance', async () => {
    await consumerB.connect()
    await consumerB.subscribe({ topics: [topic], fromBeginning: true })
    await consumerB.run({ autoCommit: false, eachMessage: eachMessage('B') })
    await waitFor(split, STEP_TIMEOUT_MS - 10000, 'both consumers to own partitions',
      () => `(assignments A ${JSON.stringify(joins.A)}, B ${JSON.stringify(joins.B)})`)
    await sleep(SETTLE_MS)            // the committed offsets hold: nothing is read again
  })
  check(!duplicates.length, `after the rebalance ${duplicates.length} messages came again, e.g. ${JSON.stringify(duplicates[0])}`)
  check(split(), `the assignment changed after the rebalance: A ${JSON.stringify(joins.A)}, B ${JSON.stringify(joins.B)}`)
  out.rebalance = { A: joins.A[joins.A.length - 1], B: joins.B[joins.B.length - 1], joins_A: joins.A.length }
  await step('consumers_leave', () => Promise.all([consumerA.disconnect(), consumerB.disconnect()]))

  // -- transactions: commit, abort, commit ----------------------------------------------------
  const txProducer = kafka.producer({ transactionalId: `kjs-tx-${run}`, maxInFlightRequests: 1,
    idempotent: true, createPartitioner: Partitioners.DefaultPartitioner })
  cleanup.unshift(() => txProducer.disconnect())
  const txns = [['t1', 'commit'], ['t2', 'abort'], ['t3', 'commit']]
  const txnGroup = `kjs-txn-offsets-${run}`
  const txnOffsets = { t2: '5', t3: '7' }   // sendOffsets for topic/0 in that transaction
  const markers = { 0: 0, 1: 0, 2: 0 }
  const records = { 0: 0, 1: 0, 2: 0 }
  await step('transactions', async () => {
    await txProducer.connect()
    for (const [name, end] of txns) {
      const txn = await txProducer.transaction()
      const touched = new Set()
      for (let i = 0; i < TXN_MESSAGES; i += TXN_MESSAGES / 2) {
        const meta = await txn.send({ topic: txnTopic, acks: -1, messages: Array.from(
          { length: TXN_MESSAGES / 2 }, (_, j) => ({ key: `${name}-${i + j}`, value: `${name}:${i + j}` })) })
        for (const r of meta) {
          check(r.errorCode === 0, `transactional produce ${r.topicName}/${r.partition}: error ${r.errorCode}`)
          touched.add(r.partition)
        }
      }
      if (txnOffsets[name]) {
        await txn.sendOffsets({ consumerGroupId: txnGroup,
          topics: [{ topic, partitions: [{ partition: 0, offset: txnOffsets[name] }] }] })
      }
      await (end === 'commit' ? txn.commit() : txn.abort())
      for (const p of touched) markers[p] += 1
    }
  })

  const readAll = async (readUncommitted, expected) => {
    const seen = []
    const consumer = newConsumer({ groupId: `kjs-txn-${readUncommitted ? 'ru' : 'rc'}-${run}`, readUncommitted })
    await consumer.connect()
    await consumer.subscribe({ topics: [txnTopic], fromBeginning: true })
    await consumer.run({ eachMessage: async ({ partition, message }) => {
      seen.push(String(message.value))
      records[partition] += readUncommitted ? 1 : 0
    } })
    await waitFor(() => seen.length >= expected, STEP_TIMEOUT_MS - 15000,
      `${expected} transactional messages (readUncommitted: ${readUncommitted})`, () => `(got ${seen.length}: ${seen.slice(0, 5)})`)
    await sleep(SETTLE_MS)
    await consumer.disconnect()
    return seen.sort()
  }
  const want = prefixes => txns.filter(([n]) => prefixes.includes(n))
    .flatMap(([n]) => Array.from({ length: TXN_MESSAGES }, (_, i) => `${n}:${i}`)).sort()
  await step('read_committed', async () => {
    const seen = await readAll(false, 2 * TXN_MESSAGES)
    check(JSON.stringify(seen) === JSON.stringify(want(['t1', 't3'])),
      `readUncommitted: false saw ${seen.length} messages, ${seen.filter(v => v.startsWith('t2')).length} from the aborted transaction: ${seen.slice(0, 30)}`)
  })
  await step('read_uncommitted', async () => {
    const seen = await readAll(true, 3 * TXN_MESSAGES)
    check(JSON.stringify(seen) === JSON.stringify(want(['t1', 't2', 't3'])),
      `readUncommitted: true saw ${seen.length} messages, expected all ${3 * TXN_MESSAGES}`)
  })
  await step('transaction_offsets', async () => {
    const [committed] = await admin.fetchOffsets({ groupId: txnGroup, topics: [topic] })
    const got = Object.fromEntries(committed.partitions.map(p => [p.partition, String(p.offset)]))
    check(got[0] === txnOffsets.t3 && got[1] === '-1' && got[2] === '-1',
      `fetchOffsets ${txnGroup}: ${JSON.stringify(got)}; expected ${topic}/0 at ${txnOffsets.t3} ` +
      `(sendOffsets of the committed transaction; ${txnOffsets.t2} was aborted), none elsewhere`)
  })
  await step('transaction_end_offsets', async () => {
    for (const end of await admin.fetchTopicOffsets(txnTopic)) {
      const p = end.partition
      check(Number(end.high) === records[p] + markers[p],
        `${txnTopic}/${p}: end offset ${end.high}, expected ${records[p]} records + ${markers[p]} control markers`)
    }
  })
  out.transactions = { committed: 2, aborted: 1, messages_each: TXN_MESSAGES, markers }

  // -- delete the topics ----------------------------------------------------------------------
  await step('delete_topics', async () => {
    await admin.deleteTopics({ topics: [topic, txnTopic], timeout: 30000 })
    let listed = await admin.listTopics()
    const deadline = Date.now() + 30000
    while ((listed.includes(topic) || listed.includes(txnTopic)) && Date.now() < deadline) {
      await sleep(500)
      listed = await admin.listTopics()
    }
    check(!listed.includes(topic) && !listed.includes(txnTopic), `listTopics still has the deleted topics: ${listed}`)
  })
}

async function finish(code) {
  for (const disconnect of cleanup) {
    await withTimeout(Promise.resolve().then(disconnect), 10000, 'disconnect').catch(() => {})
  }
  out.seconds = (Date.now() - started) / 1000
  process.stdout.write(JSON.stringify(out) + '\n')
  process.exit(code)
}

main().then(() => {
  out.ok = true
  return finish(0)
}, e => {
  out.step = e.step || null
  out.error = e instanceof CheckFailed ? e.message : `${e.name}: ${e.message}`
  if (!(e instanceof CheckFailed)) out.kafkajs_log = recentLogs.slice(-8)
  process.stderr.write(`kafkajs check FAILED${e.step ? ` in ${e.step}` : ''}: ${out.error}\n`)
  return finish(1)
})
