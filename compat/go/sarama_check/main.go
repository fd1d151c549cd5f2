// Command sarama_check drives IBM/sarama (Burrow's client) against a Kafka cluster and prints
// one JSON line per step: {"name", "ok", "error", "seconds", ...figures}. Steps run in order
// and share state (one topic, two groups); a step whose prerequisite failed still runs and
// fails on its own assertions. Exit code 0 only when every step passed.
//
//	sarama_check -brokers H:P[,H:P] [-id suffix] [-v]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

// The newest protocol level rayka serves (Kafka 3.8's API versions).
var version = sarama.V3_8_0_0

const (
	partitions      = 3
	grownPartitions = 4
	syncMessages    = 300               // one at a time
	syncBatch       = 100               // in one SendMessages
	asyncMessages   = 200               // per codec
	manualMessages  = 50                // into the partition CreatePartitions adds
	stepDeadline    = 90 * time.Second  // a poll for an expected state
	stepHang        = 300 * time.Second // a whole step
)

type step struct {
	Name    string         `json:"name"`
	OK      bool           `json:"ok"`
	Error   string         `json:"error,omitempty"`
	Seconds float64        `json:"seconds"`
	Figures map[string]any `json:"figures,omitempty"`
}

type state struct {
	brokers []string
	id      string
	topic   string
	// every record produced: key -> value, and how many per partition
	sent     map[string]string
	admin    sarama.ClusterAdmin
	client   sarama.Client
	groups   map[string]string // strategy name -> group id
	live     *groupRun         // the sticky group, kept running for the describe step
	failures int
}

func config() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = version
	c.ClientID = "sarama-compat"
	// Admin lookups of a deleted or absent topic must not create it (the clusters
	// auto-create topics).
	c.Metadata.AllowAutoTopicCreation = false
	c.Admin.Timeout = 30 * time.Second
	c.Net.DialTimeout = 10 * time.Second
	return c
}

func (s *state) run(name string, fn func() (map[string]any, error)) {
	t0 := time.Now()
	type outcome struct {
		figures map[string]any
		err     error
	}
	done := make(chan outcome, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- outcome{nil, fmt.Errorf("panic: %v", r)}
			}
		}()
		f, err := fn()
		done <- outcome{f, err}
	}()
	var figures map[string]any
	var err error
	select {
	case o := <-done:
		figures, err = o.figures, o.err
	case <-time.After(stepHang):
		// a hung call is this step's failure; the steps after it still run
		err = fmt.Errorf("did not finish in %v", stepHang)
	}
	st := step{Name: name, OK: err == nil, Seconds: time.Since(t0).Seconds(), Figures: figures}
	if err != nil {
		st.Error = err.Error()
		s.failures++
	}
	line, _ := json.Marshal(st)
	fmt.Println(string(line))
}

// poll calls cond until it returns nil or the deadline passes; the last error is returned.
func poll(deadline time.Duration, cond func() error) error {
	end := time.Now().Add(deadline)
	for {
		err := cond()
		if err == nil || time.Now().After(end) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap servers")
	id := flag.String("id", fmt.Sprintf("%d", time.Now().UnixNano()%1000000000), "name suffix")
	verbose := flag.Bool("v", false, "sarama's own log on stderr")
	flag.Parse()
	if *verbose {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)
	}
	s := &state{brokers: strings.Split(*brokers, ","), id: *id, topic: "sarama-" + *id,
		sent: map[string]string{}, groups: map[string]string{}}
	var err error
	if s.client, err = sarama.NewClient(s.brokers, config()); err == nil {
		s.admin, err = sarama.NewClusterAdminFromClient(s.client)
	}
	if err != nil {
		s.run("connect", func() (map[string]any, error) { return nil, err })
		os.Exit(1)
	}
	s.run("admin.create_topic", s.createTopic)
	s.run("admin.describe_topics", s.describeTopics)
	s.run("admin.list_topics", s.listTopics)
	s.run("admin.describe_config", s.describeConfig)
	s.run("admin.alter_config", s.alterConfig)
	s.run("admin.incremental_alter_config", s.incrementalAlterConfig)
	s.run("sync_producer.idempotent", s.syncProducer)
	for _, codec := range []sarama.CompressionCodec{sarama.CompressionSnappy,
		sarama.CompressionLZ4, sarama.CompressionZSTD} {
		s.run("async_producer."+codec.String(), func() (map[string]any, error) {
			return s.asyncProducer(codec)
		})
	}
	s.run("admin.create_partitions", s.createPartitions)
	s.run("consumer_group.range", func() (map[string]any, error) {
		return s.consumerGroup("range", sarama.NewBalanceStrategyRange(), false)
	})
	s.run("consumer_group.sticky", func() (map[string]any, error) {
		return s.consumerGroup("sticky", sarama.NewBalanceStrategySticky(), true)
	})
	s.run("admin.list_consumer_groups", s.listConsumerGroups)
	s.run("admin.describe_consumer_groups", s.describeConsumerGroups)
	s.run("admin.list_consumer_group_offsets", s.listConsumerGroupOffsets)
	s.run("offset_manager", s.offsetManager)
	s.run("admin.delete_consumer_group", s.deleteConsumerGroups)
	s.run("admin.delete_records", s.deleteRecords)
	s.run("admin.acls", s.acls)
	s.run("admin.describe_cluster", s.describeCluster)
	s.run("admin.delete_topic", s.deleteTopic)
	if s.live != nil {
		s.live.stop()
	}
	s.admin.Close()
	if s.failures > 0 {
		os.Exit(1)
	}
}

// -- topics and configs -----------------------------------------------------------------

func (s *state) createTopic() (map[string]any, error) {
	detail := &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 3,
		ConfigEntries: map[string]*string{"min.insync.replicas": strPtr("2")}}
	if err := s.admin.CreateTopic(s.topic, detail, false); err != nil {
		return nil, fmt.Errorf("CreateTopic: %w", err)
	}
	// the cluster knows it once every partition has a leader
	if err := poll(stepDeadline, func() error {
		md, err := s.admin.DescribeTopics([]string{s.topic})
		if err != nil {
			return err
		}
		if len(md) != 1 || !errors.Is(md[0].Err, sarama.ErrNoError) {
			return fmt.Errorf("DescribeTopics: %+v", md)
		}
		if len(md[0].Partitions) != partitions {
			return fmt.Errorf("%d partitions, want %d", len(md[0].Partitions), partitions)
		}
		for _, p := range md[0].Partitions {
			if p.Leader < 0 {
				return fmt.Errorf("partition %d has no leader", p.ID)
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// Kafka's brokers learn of a topic asynchronously (UpdateMetadata): the admin calls
	// that follow may go to any broker, so every broker must know it first
	if err := poll(stepDeadline, func() error { return s.everyBrokerKnows(partitions) }); err != nil {
		return nil, err
	}
	err := s.admin.CreateTopic(s.topic, detail, false)
	if !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return nil, fmt.Errorf("creating it again: got %v, want %v", err,
			sarama.ErrTopicAlreadyExists)
	}
	// validate-only creates nothing
	other := s.topic + "-validate"
	if err := s.admin.CreateTopic(other, detail, true); err != nil {
		return nil, fmt.Errorf("validate-only CreateTopic: %w", err)
	}
	topics, err := s.admin.ListTopics()
	if err != nil {
		return nil, err
	}
	if _, ok := topics[other]; ok {
		return nil, fmt.Errorf("validate-only CreateTopic created %s", other)
	}
	return nil, nil
}

func (s *state) everyBrokerKnows(want int) error {
	for _, b := range s.client.Brokers() {
		if ok, _ := b.Connected(); !ok {
			if err := b.Open(s.client.Config()); err != nil && !errors.Is(err, sarama.ErrAlreadyConnected) {
				return err
			}
		}
		req := sarama.NewMetadataRequest(version, []string{s.topic})
		req.AllowAutoTopicCreation = false
		md, err := b.GetMetadata(req)
		if err != nil {
			return fmt.Errorf("broker %d: %w", b.ID(), err)
		}
		if len(md.Topics) != 1 || !errors.Is(md.Topics[0].Err, sarama.ErrNoError) ||
			len(md.Topics[0].Partitions) != want {
			return fmt.Errorf("broker %d does not know %s with %d partitions yet", b.ID(),
				s.topic, want)
		}
	}
	return nil
}

func (s *state) describeTopics() (map[string]any, error) {
	md, err := s.admin.DescribeTopics([]string{s.topic})
	if err != nil {
		return nil, err
	}
	if len(md) != 1 || md[0].Name != s.topic || md[0].IsInternal {
		return nil, fmt.Errorf("unexpected metadata %+v", md)
	}
	ids := []int32{}
	for _, p := range md[0].Partitions {
		ids = append(ids, p.ID)
		if len(p.Replicas) != 3 || len(p.Isr) < 2 {
			return nil, fmt.Errorf("partition %d: replicas %v isr %v", p.ID, p.Replicas, p.Isr)
		}
		if !contains(p.Replicas, p.Leader) || !contains(p.Isr, p.Leader) {
			return nil, fmt.Errorf("partition %d: leader %d not in replicas %v / isr %v",
				p.ID, p.Leader, p.Replicas, p.Isr)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	if fmt.Sprint(ids) != "[0 1 2]" {
		return nil, fmt.Errorf("partition ids %v", ids)
	}
	return nil, nil
}

func (s *state) listTopics() (map[string]any, error) {
	topics, err := s.admin.ListTopics()
	if err != nil {
		return nil, err
	}
	d, ok := topics[s.topic]
	if !ok {
		return nil, fmt.Errorf("%s not listed among %d topics", s.topic, len(topics))
	}
	if d.NumPartitions != partitions || d.ReplicationFactor != 3 {
		return nil, fmt.Errorf("listed with %d partitions, replication factor %d",
			d.NumPartitions, d.ReplicationFactor)
	}
	// ListTopics carries the topic's own (non-default) configs
	if v := d.ConfigEntries["min.insync.replicas"]; v == nil || *v != "2" {
		return nil, fmt.Errorf("listed configs %v lack min.insync.replicas=2", deref(d.ConfigEntries))
	}
	return map[string]any{"topics": len(topics)}, nil
}

func (s *state) topicConfig() (map[string]sarama.ConfigEntry, error) {
	entries, err := s.admin.DescribeConfig(sarama.ConfigResource{
		Type: sarama.TopicResource, Name: s.topic})
	if err != nil {
		return nil, err
	}
	out := map[string]sarama.ConfigEntry{}
	for _, e := range entries {
		out[e.Name] = e
	}
	return out, nil
}

// wantConfig polls DescribeConfig until the topic's own overrides are exactly `want`
// (name -> value) for the names in `names`; a name absent from want must not be a topic
// override.
func (s *state) wantConfig(names []string, want map[string]string) error {
	return poll(30*time.Second, func() error {
		cfg, err := s.topicConfig()
		if err != nil {
			return err
		}
		for _, n := range names {
			e, ok := cfg[n]
			if !ok {
				return fmt.Errorf("DescribeConfig lacks %s", n)
			}
			if v, set := want[n]; set {
				if e.Value != v || e.Source != sarama.SourceTopic || e.Default {
					return fmt.Errorf("%s = %q (source %v, default %v), want %q set on the topic",
						n, e.Value, e.Source, e.Default, v)
				}
			} else if e.Source == sarama.SourceTopic {
				return fmt.Errorf("%s = %q is still a topic override", n, e.Value)
			}
		}
		return nil
	})
}

func (s *state) describeConfig() (map[string]any, error) {
	cfg, err := s.topicConfig()
	if err != nil {
		return nil, err
	}
	for _, n := range []string{"cleanup.policy", "retention.ms", "segment.bytes",
		"max.message.bytes", "compression.type"} {
		if e, ok := cfg[n]; !ok || e.Source == sarama.SourceTopic {
			return nil, fmt.Errorf("%s: %+v (want a default, not a topic override)", n, e)
		}
	}
	if err := s.wantConfig([]string{"min.insync.replicas"},
		map[string]string{"min.insync.replicas": "2"}); err != nil {
		return nil, err
	}
	return map[string]any{"entries": len(cfg)}, nil
}

// AlterConfigs (not incremental) replaces the whole set of a topic's overrides: the
// min.insync.replicas set at creation goes back to its default.
func (s *state) alterConfig() (map[string]any, error) {
	err := s.admin.AlterConfig(sarama.TopicResource, s.topic,
		map[string]*string{"retention.ms": strPtr("86400000")}, false)
	if err != nil {
		return nil, err
	}
	return nil, s.wantConfig([]string{"retention.ms", "min.insync.replicas"},
		map[string]string{"retention.ms": "86400000"})
}

func (s *state) incrementalAlterConfig() (map[string]any, error) {
	err := s.admin.IncrementalAlterConfig(sarama.TopicResource, s.topic,
		map[string]sarama.IncrementalAlterConfigsEntry{
			"min.insync.replicas": {Operation: sarama.IncrementalAlterConfigsOperationSet,
				Value: strPtr("2")},
			"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationDelete},
			"cleanup.policy": {Operation: sarama.IncrementalAlterConfigsOperationAppend,
				Value: strPtr("compact")},
		}, false)
	if err != nil {
		return nil, err
	}
	if err := s.wantConfig([]string{"min.insync.replicas", "retention.ms", "cleanup.policy"},
		map[string]string{"min.insync.replicas": "2", "cleanup.policy": "delete,compact"}); err != nil {
		return nil, err
	}
	// a SUBTRACT back to plain deletion (the producers' records have distinct keys, but
	// DeleteRecords needs a delete policy)
	err = s.admin.IncrementalAlterConfig(sarama.TopicResource, s.topic,
		map[string]sarama.IncrementalAlterConfigsEntry{
			"cleanup.policy": {Operation: sarama.IncrementalAlterConfigsOperationSubtract,
				Value: strPtr("compact")},
		}, false)
	if err != nil {
		return nil, fmt.Errorf("SUBTRACT: %w", err)
	}
	return nil, s.wantConfig([]string{"min.insync.replicas", "cleanup.policy"},
		map[string]string{"min.insync.replicas": "2", "cleanup.policy": "delete"})
}

// -- producers --------------------------------------------------------------------------

func value(key string, codec string) string {
	// compressible, and tied to its key so the consumers can check it
	return fmt.Sprintf("%s|%s|%s", key, codec, strings.Repeat("payload-"+key+" ", 8))
}

func (s *state) syncProducer() (map[string]any, error) {
	c := config()
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Retry.Max = 5
	c.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer(s.brokers, c)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	last := map[int32]int64{}
	check := func(key string, part int32, off int64) error {
		if prev, ok := last[part]; ok && off != prev+1 || !ok && off != 0 {
			return fmt.Errorf("%s: partition %d offset %d after %d (want contiguous from 0)",
				key, part, off, prev)
		}
		last[part] = off
		return nil
	}
	for i := 0; i < syncMessages; i++ {
		key := fmt.Sprintf("sync-%d", i)
		msg := &sarama.ProducerMessage{Topic: s.topic, Key: sarama.StringEncoder(key),
			Value:   sarama.StringEncoder(value(key, "none")),
			Headers: []sarama.RecordHeader{{Key: []byte("i"), Value: []byte(fmt.Sprint(i))}}}
		part, off, err := p.SendMessage(msg)
		if err != nil {
			return nil, fmt.Errorf("SendMessage %d: %w", i, err)
		}
		if err := check(key, part, off); err != nil {
			return nil, err
		}
		s.sent[key] = value(key, "none")
	}
	batch := []*sarama.ProducerMessage{}
	for i := 0; i < syncBatch; i++ {
		key := fmt.Sprintf("batch-%d", i)
		batch = append(batch, &sarama.ProducerMessage{Topic: s.topic,
			Key: sarama.StringEncoder(key), Value: sarama.StringEncoder(value(key, "none"))})
	}
	if err := p.SendMessages(batch); err != nil {
		return nil, fmt.Errorf("SendMessages: %w", err)
	}
	// a batch's offsets are per partition in send order
	byPart := map[int32][]*sarama.ProducerMessage{}
	for _, m := range batch {
		byPart[m.Partition] = append(byPart[m.Partition], m)
		s.sent[string(m.Key.(sarama.StringEncoder))] = value(string(m.Key.(sarama.StringEncoder)), "none")
	}
	for part, ms := range byPart {
		for _, m := range ms {
			if err := check(string(m.Key.(sarama.StringEncoder)), part, m.Offset); err != nil {
				return nil, err
			}
		}
	}
	if len(last) != partitions {
		return nil, fmt.Errorf("hash partitioner used %d partitions of %d", len(last), partitions)
	}
	return map[string]any{"messages": syncMessages + syncBatch, "end_offsets": last}, nil
}

func (s *state) asyncProducer(codec sarama.CompressionCodec) (map[string]any, error) {
	c := config()
	c.Producer.Compression = codec
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Flush.Messages = 50
	c.Producer.Flush.Frequency = 20 * time.Millisecond
	p, err := sarama.NewAsyncProducer(s.brokers, c)
	if err != nil {
		return nil, err
	}
	name := codec.String()
	go func() {
		for i := 0; i < asyncMessages; i++ {
			key := fmt.Sprintf("%s-%d", name, i)
			p.Input() <- &sarama.ProducerMessage{Topic: s.topic, Key: sarama.StringEncoder(key),
				Value: sarama.StringEncoder(value(key, name))}
		}
	}()
	ok, errs := 0, []string{}
	timeout := time.After(stepDeadline)
	for ok+len(errs) < asyncMessages {
		select {
		case m := <-p.Successes():
			ok++
			key := string(m.Key.(sarama.StringEncoder))
			s.sent[key] = value(key, name)
		case e := <-p.Errors():
			errs = append(errs, e.Err.Error())
		case <-timeout:
			p.AsyncClose()
			return nil, fmt.Errorf("%d acked, %d failed of %d after %v", ok, len(errs),
				asyncMessages, stepDeadline)
		}
	}
	if err := p.Close(); err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%d of %d failed: %s", len(errs), asyncMessages, errs[0])
	}
	return map[string]any{"messages": ok}, nil
}

func (s *state) createPartitions() (map[string]any, error) {
	if err := s.admin.CreatePartitions(s.topic, grownPartitions, nil, false); err != nil {
		return nil, err
	}
	if err := poll(stepDeadline, func() error {
		if err := s.client.RefreshMetadata(s.topic); err != nil {
			return err
		}
		ps, err := s.client.Partitions(s.topic)
		if err != nil {
			return err
		}
		if len(ps) != grownPartitions {
			return fmt.Errorf("%d partitions, want %d", len(ps), grownPartitions)
		}
		if _, err := s.client.Leader(s.topic, grownPartitions-1); err != nil {
			return fmt.Errorf("new partition's leader: %w", err)
		}
		return s.everyBrokerKnows(grownPartitions)
	}); err != nil {
		return nil, err
	}
	// shrinking is refused
	if err := s.admin.CreatePartitions(s.topic, 2, nil, false); !errors.Is(err,
		sarama.ErrInvalidPartitions) {
		return nil, fmt.Errorf("CreatePartitions to 2: got %v, want %v", err,
			sarama.ErrInvalidPartitions)
	}
	c := config()
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Successes = true
	c.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer(s.brokers, c)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	for i := 0; i < manualMessages; i++ {
		key := fmt.Sprintf("manual-%d", i)
		part, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: s.topic,
			Partition: grownPartitions - 1, Key: sarama.StringEncoder(key),
			Value: sarama.StringEncoder(value(key, "none"))})
		if err != nil {
			return nil, fmt.Errorf("send to partition %d: %w", grownPartitions-1, err)
		}
		if part != grownPartitions-1 || off != int64(i) {
			return nil, fmt.Errorf("%s landed at %d/%d, want %d/%d", key, part, off,
				grownPartitions-1, i)
		}
		s.sent[key] = value(key, "none")
	}
	return nil, nil
}

// -- consumer groups --------------------------------------------------------------------

type seen struct {
	member int
	gen    int32
}

type groupRun struct {
	group   string
	topic   string
	mu      sync.Mutex
	got     map[string]string          // key -> value
	offsets map[int32]map[int64][]seen // partition -> offset -> who saw it
	claims  map[int][]map[string][]int32
	gens    map[int][]int32
	errs    []string
	delay   time.Duration
	cancels []context.CancelFunc
	groups  []sarama.ConsumerGroup
	wg      sync.WaitGroup
}

type handler struct {
	run    *groupRun
	member int
}

func (h *handler) Setup(sess sarama.ConsumerGroupSession) error {
	h.run.mu.Lock()
	defer h.run.mu.Unlock()
	h.run.claims[h.member] = append(h.run.claims[h.member], sess.Claims())
	h.run.gens[h.member] = append(h.run.gens[h.member], sess.GenerationID())
	return nil
}

func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *handler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			h.run.mu.Lock()
			if h.run.offsets[m.Partition] == nil {
				h.run.offsets[m.Partition] = map[int64][]seen{}
			}
			h.run.offsets[m.Partition][m.Offset] = append(h.run.offsets[m.Partition][m.Offset],
				seen{h.member, sess.GenerationID()})
			h.run.got[string(m.Key)] = string(m.Value)
			delay := h.run.delay
			h.run.mu.Unlock()
			sess.MarkMessage(m, "")
			time.Sleep(delay)
		case <-sess.Context().Done():
			return nil
		}
	}
}

func (r *groupRun) start(brokers []string, strategy sarama.BalanceStrategy, member int) error {
	c := config()
	c.ClientID = fmt.Sprintf("sarama-compat-%d", member)
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Interval = 500 * time.Millisecond
	c.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{strategy}
	c.Consumer.Return.Errors = true
	g, err := sarama.NewConsumerGroup(brokers, r.group, c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancels = append(r.cancels, cancel)
	r.groups = append(r.groups, g)
	h := &handler{run: r, member: member}
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{r.topic}, h); err != nil && ctx.Err() == nil {
				r.mu.Lock()
				r.errs = append(r.errs, fmt.Sprintf("member %d Consume: %v", member, err))
				r.mu.Unlock()
				time.Sleep(time.Second)
			}
		}
	}()
	go func() {
		defer r.wg.Done()
		for err := range g.Errors() {
			r.mu.Lock()
			r.errs = append(r.errs, fmt.Sprintf("member %d: %v", member, err))
			r.mu.Unlock()
		}
	}()
	return nil
}

func (r *groupRun) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// stop cancels each member's session and closes it (Close commits the marked offsets and
// leaves the group).
func (r *groupRun) stop() error {
	var first error
	for i, g := range r.groups {
		r.cancels[i]()
		if err := g.Close(); err != nil && first == nil {
			first = err
		}
	}
	r.wg.Wait()
	r.groups, r.cancels = nil, nil
	return first
}

func (s *state) consumerGroup(name string, strategy sarama.BalanceStrategy, keep bool) (map[string]any, error) {
	r := &groupRun{group: fmt.Sprintf("sarama-%s-%s", name, s.id), topic: s.topic,
		got: map[string]string{}, offsets: map[int32]map[int64][]seen{},
		claims: map[int][]map[string][]int32{}, gens: map[int][]int32{},
		delay: 3 * time.Millisecond}
	s.groups[name] = r.group
	total := len(s.sent)
	if total == 0 {
		return nil, errors.New("nothing was produced")
	}
	if err := r.start(s.brokers, strategy, 1); err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			r.stop()
		}
	}()
	// the second member joins once the first has read a quarter of the topic: the
	// rebalance happens with records left on every partition
	if err := poll(stepDeadline, func() error {
		if n := r.count(); n < total/4 {
			return fmt.Errorf("member 1 read %d of %d before the second joined", n, total)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := r.start(s.brokers, strategy, 2); err != nil {
		return nil, err
	}
	if err := poll(stepDeadline, func() error {
		if n := r.count(); n < total {
			return fmt.Errorf("read %d of %d distinct records", n, total)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.claims[2]) == 0 {
			return errors.New("the second member never got a session")
		}
		return nil
	}); err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		return map[string]any{"errors": r.errs}, err
	}
	r.mu.Lock()
	r.delay = 0
	r.mu.Unlock()
	// a short settle: a duplicate delivery after the last new record would show here
	time.Sleep(2 * time.Second)
	if !keep {
		stopped = true
		if err := r.stop(); err != nil {
			return nil, fmt.Errorf("Close: %w", err)
		}
	} else {
		s.live = r
		stopped = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	figures := map[string]any{"records": total, "claims_member1": r.claims[1],
		"claims_member2": r.claims[2], "generations_member1": r.gens[1],
		"generations_member2": r.gens[2]}
	for key, want := range s.sent {
		if got, ok := r.got[key]; !ok || got != want {
			return figures, fmt.Errorf("record %s: got %q, want %q", key, got, want)
		}
	}
	dup := 0
	for part, offs := range r.offsets {
		for off, who := range offs {
			if len(who) > 1 {
				dup++
				if dup == 1 {
					figures["first_duplicate"] = fmt.Sprintf("partition %d offset %d seen by %v",
						part, off, who)
				}
			}
		}
	}
	figures["duplicates"] = dup
	if dup > 0 {
		return figures, fmt.Errorf("%d records delivered twice (%v)", dup, figures["first_duplicate"])
	}
	if len(r.gens[1]) < 2 {
		return figures, fmt.Errorf("member 1 had %d sessions: no rebalance when member 2 joined",
			len(r.gens[1]))
	}
	// after the rebalance both members hold partitions and together all of them
	last1 := r.claims[1][len(r.claims[1])-1][s.topic]
	last2 := r.claims[2][len(r.claims[2])-1][s.topic]
	if len(last1) == 0 || len(last2) == 0 || len(last1)+len(last2) != grownPartitions {
		return figures, fmt.Errorf("final assignment %v + %v of %d partitions", last1, last2,
			grownPartitions)
	}
	if len(r.errs) > 0 {
		return figures, fmt.Errorf("consumer errors: %s", r.errs[0])
	}
	return figures, nil
}

func (s *state) listConsumerGroups() (map[string]any, error) {
	var groups map[string]string
	err := poll(30*time.Second, func() error {
		var err error
		if groups, err = s.admin.ListConsumerGroups(); err != nil {
			return err
		}
		for _, g := range s.groups {
			if groups[g] != "consumer" {
				return fmt.Errorf("group %s listed as %q", g, groups[g])
			}
		}
		return nil
	})
	return map[string]any{"groups": len(groups)}, err
}

func (s *state) describeConsumerGroups() (map[string]any, error) {
	if s.live == nil {
		return nil, errors.New("the sticky group is not running")
	}
	ds, err := s.admin.DescribeConsumerGroups([]string{s.groups["sticky"], s.groups["range"]})
	if err != nil {
		return nil, err
	}
	if len(ds) != 2 {
		return nil, fmt.Errorf("%d descriptions for 2 groups", len(ds))
	}
	live, closed := ds[0], ds[1]
	if live.GroupId != s.groups["sticky"] {
		live, closed = closed, live
	}
	if live.State != "Stable" || live.ProtocolType != "consumer" || live.Protocol != "sticky" ||
		len(live.Members) != 2 {
		return nil, fmt.Errorf("running group: state %q protocol type %q protocol %q, %d members",
			live.State, live.ProtocolType, live.Protocol, len(live.Members))
	}
	assigned := 0
	for id, m := range live.Members {
		a, err := m.GetMemberAssignment()
		if err != nil {
			return nil, fmt.Errorf("member %s assignment: %w", id, err)
		}
		if len(a.Topics[s.topic]) == 0 {
			return nil, fmt.Errorf("member %s (%s) holds no partition", id, m.ClientId)
		}
		assigned += len(a.Topics[s.topic])
		if !strings.HasPrefix(m.ClientId, "sarama-compat-") {
			return nil, fmt.Errorf("member %s client id %q", id, m.ClientId)
		}
	}
	if assigned != grownPartitions {
		return nil, fmt.Errorf("members hold %d partitions of %d", assigned, grownPartitions)
	}
	if closed.State != "Empty" || len(closed.Members) != 0 {
		return nil, fmt.Errorf("closed group: state %q, %d members", closed.State, len(closed.Members))
	}
	// a group with members cannot be deleted
	if err := s.admin.DeleteConsumerGroup(s.groups["sticky"]); !errors.Is(err, sarama.ErrNonEmptyGroup) {
		return nil, fmt.Errorf("deleting the running group: got %v, want %v", err,
			sarama.ErrNonEmptyGroup)
	}
	if err := s.live.stop(); err != nil {
		return nil, fmt.Errorf("closing the sticky group: %w", err)
	}
	s.live = nil
	return nil, nil
}

func (s *state) endOffsets() (map[int32]int64, error) {
	out := map[int32]int64{}
	for p := int32(0); p < grownPartitions; p++ {
		off, err := s.client.GetOffset(s.topic, p, sarama.OffsetNewest)
		if err != nil {
			return nil, err
		}
		out[p] = off
	}
	return out, nil
}

func (s *state) listConsumerGroupOffsets() (map[string]any, error) {
	ends, err := s.endOffsets()
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"range", "sticky"} {
		group := s.groups[name]
		resp, err := s.admin.ListConsumerGroupOffsets(group, nil)
		if err != nil {
			return nil, err
		}
		for p := int32(0); p < grownPartitions; p++ {
			b := resp.GetBlock(s.topic, p)
			if b == nil || !errors.Is(b.Err, sarama.ErrNoError) || b.Offset != ends[p] {
				return map[string]any{"end_offsets": ends}, fmt.Errorf(
					"group %s partition %d: committed %+v, end offset %d", group, p, b, ends[p])
			}
		}
	}
	return map[string]any{"end_offsets": ends}, nil
}

func (s *state) offsetManager() (map[string]any, error) {
	group := "sarama-om-" + s.id
	s.groups["offset-manager"] = group
	var client sarama.Client
	// the offset manager closes first: it releases the partition's manager, whose Close
	// waits for that
	closeAll := func(om sarama.OffsetManager, pom sarama.PartitionOffsetManager) error {
		err := om.Close()
		if e := pom.Close(); e != nil && err == nil {
			err = e
		}
		client.Close()
		return err
	}
	open := func() (sarama.OffsetManager, sarama.PartitionOffsetManager, error) {
		c := config()
		c.Consumer.Offsets.Initial = sarama.OffsetOldest
		c.Consumer.Offsets.AutoCommit.Enable = false
		var err error
		if client, err = sarama.NewClient(s.brokers, c); err != nil {
			return nil, nil, err
		}
		om, err := sarama.NewOffsetManagerFromClient(group, client)
		if err != nil {
			client.Close()
			return nil, nil, err
		}
		pom, err := om.ManagePartition(s.topic, 1)
		if err != nil {
			om.Close()
			client.Close()
			return nil, nil, err
		}
		return om, pom, nil
	}
	om, pom, err := open()
	if err != nil {
		return nil, err
	}
	if off, _ := pom.NextOffset(); off != sarama.OffsetOldest {
		return nil, fmt.Errorf("a new group's next offset %d, want the initial %d", off,
			sarama.OffsetOldest)
	}
	pom.MarkOffset(7, "meta-7")
	om.Commit()
	pom.ResetOffset(5, "meta-5") // backwards: only ResetOffset may
	om.Commit()
	select {
	case e := <-pom.Errors():
		return nil, fmt.Errorf("commit: %v", e)
	default:
	}
	if err := closeAll(om, pom); err != nil {
		return nil, fmt.Errorf("Close: %w", err)
	}
	om, pom, err = open()
	if err != nil {
		return nil, err
	}
	defer closeAll(om, pom)
	off, meta := pom.NextOffset()
	if off != 5 || meta != "meta-5" {
		return nil, fmt.Errorf("reopened: next offset %d metadata %q, want 5 \"meta-5\"", off, meta)
	}
	resp, err := s.admin.ListConsumerGroupOffsets(group, map[string][]int32{s.topic: {1}})
	if err != nil {
		return nil, err
	}
	if b := resp.GetBlock(s.topic, 1); b == nil || b.Offset != 5 || b.Metadata != "meta-5" {
		return nil, fmt.Errorf("admin sees %+v, want offset 5 metadata meta-5", b)
	}
	return nil, nil
}

func (s *state) deleteConsumerGroups() (map[string]any, error) {
	for _, g := range s.groups {
		if err := s.admin.DeleteConsumerGroup(g); err != nil {
			return nil, fmt.Errorf("%s: %w", g, err)
		}
	}
	if err := s.admin.DeleteConsumerGroup(s.groups["range"]); !errors.Is(err, sarama.ErrGroupIDNotFound) {
		return nil, fmt.Errorf("deleting a deleted group: got %v, want %v", err, sarama.ErrGroupIDNotFound)
	}
	return nil, poll(30*time.Second, func() error {
		groups, err := s.admin.ListConsumerGroups()
		if err != nil {
			return err
		}
		for _, g := range s.groups {
			if _, ok := groups[g]; ok {
				return fmt.Errorf("%s still listed", g)
			}
		}
		return nil
	})
}

func (s *state) deleteRecords() (map[string]any, error) {
	ends, err := s.endOffsets()
	if err != nil {
		return nil, err
	}
	if ends[0] < 10 {
		return nil, fmt.Errorf("partition 0 holds %d records, want at least 10", ends[0])
	}
	if err := s.admin.DeleteRecords(s.topic, map[int32]int64{0: 10}); err != nil {
		return nil, err
	}
	if err := poll(30*time.Second, func() error {
		start, err := s.client.GetOffset(s.topic, 0, sarama.OffsetOldest)
		if err == nil && start != 10 {
			err = fmt.Errorf("log start offset %d, want 10", start)
		}
		return err
	}); err != nil {
		return nil, err
	}
	consumer, err := sarama.NewConsumerFromClient(s.client)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	if pc, err := consumer.ConsumePartition(s.topic, 0, 5); !errors.Is(err, sarama.ErrOffsetOutOfRange) {
		if pc != nil {
			pc.Close()
		}
		return nil, fmt.Errorf("consuming from a deleted offset: got %v, want %v", err,
			sarama.ErrOffsetOutOfRange)
	}
	pc, err := consumer.ConsumePartition(s.topic, 0, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	select {
	case m := <-pc.Messages():
		if m.Offset != 10 {
			return nil, fmt.Errorf("first record after DeleteRecords at offset %d, want 10", m.Offset)
		}
	case <-time.After(30 * time.Second):
		return nil, errors.New("no record read from the new log start")
	}
	return map[string]any{"end_offset": ends[0]}, nil
}

// -- ACLs, cluster, deletion ------------------------------------------------------------

func (s *state) acls() (map[string]any, error) {
	// a topic nobody uses: an ACL on a resource denies everyone it does not name
	principal := "User:sarama-" + s.id
	name := "sarama-acl-" + s.id
	literal := sarama.Resource{ResourceType: sarama.AclResourceTopic, ResourceName: name,
		ResourcePatternType: sarama.AclPatternLiteral}
	prefixed := sarama.Resource{ResourceType: sarama.AclResourceGroup, ResourceName: name,
		ResourcePatternType: sarama.AclPatternPrefixed}
	allowRead := sarama.Acl{Principal: principal, Host: "*",
		Operation: sarama.AclOperationRead, PermissionType: sarama.AclPermissionAllow}
	denyWrite := sarama.Acl{Principal: principal, Host: "127.0.0.1",
		Operation: sarama.AclOperationWrite, PermissionType: sarama.AclPermissionDeny}
	if err := s.admin.CreateACL(literal, allowRead); err != nil {
		return nil, fmt.Errorf("CreateACL: %w", err)
	}
	if err := s.admin.CreateACLs([]*sarama.ResourceAcls{
		{Resource: literal, Acls: []*sarama.Acl{&denyWrite}},
		{Resource: prefixed, Acls: []*sarama.Acl{&allowRead}}}); err != nil {
		return nil, fmt.Errorf("CreateACLs: %w", err)
	}
	filter := sarama.AclFilter{ResourceType: sarama.AclResourceAny,
		ResourcePatternTypeFilter: sarama.AclPatternAny, Principal: &principal,
		Operation: sarama.AclOperationAny, PermissionType: sarama.AclPermissionAny}
	count := func() (int, error) {
		rs, err := s.admin.ListAcls(filter)
		n := 0
		for _, r := range rs {
			n += len(r.Acls)
		}
		return n, err
	}
	if err := poll(30*time.Second, func() error {
		n, err := count()
		if err == nil && n != 3 {
			err = fmt.Errorf("ListAcls found %d of 3", n)
		}
		return err
	}); err != nil {
		return nil, err
	}
	// a filter on the literal topic alone
	topicFilter := filter
	topicFilter.ResourceType = sarama.AclResourceTopic
	topicFilter.ResourceName = &name
	topicFilter.ResourcePatternTypeFilter = sarama.AclPatternLiteral
	rs, err := s.admin.ListAcls(topicFilter)
	if err != nil {
		return nil, err
	}
	if len(rs) != 1 || len(rs[0].Acls) != 2 {
		return nil, fmt.Errorf("topic filter: %d resources", len(rs))
	}
	matched, err := s.admin.DeleteACL(filter, false)
	if err != nil {
		return nil, fmt.Errorf("DeleteACL: %w", err)
	}
	if len(matched) != 3 {
		return nil, fmt.Errorf("DeleteACL matched %d of 3", len(matched))
	}
	return nil, poll(30*time.Second, func() error {
		n, err := count()
		if err == nil && n != 0 {
			err = fmt.Errorf("ListAcls still finds %d after DeleteACL", n)
		}
		return err
	})
}

func (s *state) describeCluster() (map[string]any, error) {
	brokers, controller, err := s.admin.DescribeCluster()
	if err != nil {
		return nil, err
	}
	ids := []int32{}
	for _, b := range brokers {
		ids = append(ids, b.ID())
	}
	if len(brokers) != 3 || !contains(ids, controller) {
		return nil, fmt.Errorf("brokers %v, controller %d", ids, controller)
	}
	return map[string]any{"brokers": ids, "controller": controller}, nil
}

func (s *state) deleteTopic() (map[string]any, error) {
	if err := s.admin.DeleteTopic(s.topic); err != nil {
		return nil, err
	}
	if err := poll(stepDeadline, func() error {
		topics, err := s.admin.ListTopics()
		if err != nil {
			return err
		}
		if _, ok := topics[s.topic]; ok {
			return fmt.Errorf("%s still listed", s.topic)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := s.admin.DeleteTopic(s.topic); !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return nil, fmt.Errorf("deleting it again: got %v, want %v", err,
			sarama.ErrUnknownTopicOrPartition)
	}
	return nil, nil
}

// -- helpers ----------------------------------------------------------------------------

func contains(xs []int32, x int32) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func deref(m map[string]*string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if v != nil {
			out[k] = *v
		}
	}
	return out
}

func strPtr(s string) *string { return &s }
