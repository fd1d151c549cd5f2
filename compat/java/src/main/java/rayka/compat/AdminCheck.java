package rayka.compat;

import static rayka.compat.Common.*;

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.ResourceNotFoundException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

/**
 * The Admin calls a tool uses, each asserting its result, in groups (one SUB line each):
 * topics, configs, cluster, producers-transactions, consumer-groups, delete-records, acls,
 * scram, quotas, reassign-elect. A failed call is recorded with its exception and the
 * group goes on with its next call. Legacy alterConfigs is called by reflection: kafka-clients
 * 4.x no longer has it (recorded as not applicable there).
 */
final class AdminCheck {
    static final long T = 30;      // seconds for one Admin future

    interface Call { Object run() throws Exception; }

    static final class Group {
        final String name;
        final Map<String, Object> calls = obj();
        boolean ok = true;
        final long t0 = System.nanoTime();

        Group(String name) { this.name = name; }

        /** Run one call; true when it passed. */
        boolean call(String call, Call c) {
            long s = System.nanoTime();
            Map<String, Object> r = obj();
            try {
                Object note = c.run();
                r.put("ok", true);
                if (note != null) r.put("note", note.toString());
            } catch (Throwable e) {
                ok = false;
                r.put("ok", false);
                r.put("error", describe(e));
            }
            r.put("ms", Math.round((System.nanoTime() - s) / 1e6));
            calls.put(call, r);
            return (Boolean) r.get("ok");
        }

        void notApplicable(String call, String why) {
            Map<String, Object> r = obj();
            r.put("ok", true);
            r.put("not_applicable", why);
            calls.put(call, r);
        }

        void emit(List<Group> all) {
            Map<String, Object> o = obj();
            o.put("group", name);
            o.put("ok", ok);
            o.put("seconds", seconds(t0));
            o.put("calls", calls);
            say("SUB " + json(o));
            all.add(this);
        }
    }

    static void poll(String what, BooleanSupplier cond) throws InterruptedException {
        waitFor(Duration.ofSeconds(30), what, () -> {
            try {
                return cond.getAsBoolean();
            } catch (RuntimeException e) {
                if (e instanceof CheckFailed) throw e;
                return false;
            }
        });
    }

    static Map<String, Object> run(String bootstrap, String prefix) throws Exception {
        List<Group> done = new ArrayList<>();
        String t1 = prefix + "-adm-t1", t2 = prefix + "-adm-t2";
        try (Admin admin = admin(bootstrap)) {
            List<Integer> brokers = new ArrayList<>();
            for (Node n : admin.describeCluster().nodes().get(T, TimeUnit.SECONDS)) brokers.add(n.id());
            brokers.sort(null);

            // -- topics ------------------------------------------------------------------------
            Group g = new Group("topics");
            g.call("createTopics", () -> {
                admin.createTopics(List.of(new NewTopic(t1, 3, (short) 3).configs(Map.of("retention.ms", "3600000")),
                                           new NewTopic(t2, 1, (short) 2))).all().get(T, TimeUnit.SECONDS);
                return null;
            });
            g.call("listTopics", () -> {
                poll("listTopics lists " + t1 + " and " + t2, () -> names(admin).containsAll(List.of(t1, t2)));
                check(!names(admin).contains("__consumer_offsets"), "listTopics lists internal topics by default");
                return null;
            });
            g.call("describeTopics", () -> {
                poll("both topics described with leaders", () -> {
                    Map<String, TopicDescription> d = describeTopics(admin, t1, t2);
                    return d.get(t1).partitions().stream().allMatch(p -> p.leader() != null && p.isr().size() == 3)
                            && d.get(t2).partitions().stream().allMatch(p -> p.leader() != null);
                });
                Map<String, TopicDescription> d = describeTopics(admin, t1, t2);
                check(d.get(t1).partitions().size() == 3, t1 + " has " + d.get(t1).partitions().size() + " partitions");
                for (TopicPartitionInfo p : d.get(t1).partitions())
                    check(p.replicas().size() == 3, t1 + "-" + p.partition() + " has replicas " + p.replicas());
                check(d.get(t2).partitions().size() == 1 && d.get(t2).partitions().get(0).replicas().size() == 2,
                      t2 + " described as " + d.get(t2).partitions());
                check(!d.get(t1).topicId().equals(Uuid.ZERO_UUID), t1 + " has no topic id");
                check(!d.get(t1).isInternal(), t1 + " described as internal");
                return "topic id " + d.get(t1).topicId();
            });
            g.call("createPartitions", () -> {
                admin.createPartitions(Map.of(t1, NewPartitions.increaseTo(5))).all().get(T, TimeUnit.SECONDS);
                poll(t1 + " has 5 partitions with leaders", () -> describeTopics(admin, t1).get(t1).partitions().stream()
                        .filter(p -> p.leader() != null).count() == 5);
                return null;
            });
            g.call("deleteTopics", () -> {
                admin.deleteTopics(List.of(t2)).all().get(T, TimeUnit.SECONDS);
                poll("listTopics no longer lists " + t2, () -> !names(admin).contains(t2));
                return null;
            });
            g.emit(done);

            // -- configs -----------------------------------------------------------------------
            g = new Group("configs");
            ConfigResource topicRes = new ConfigResource(ConfigResource.Type.TOPIC, t1);
            ConfigResource brokerRes = new ConfigResource(ConfigResource.Type.BROKER, brokers.get(0).toString());
            g.call("describeConfigs(topic)", () -> {
                Config c = configs(admin, topicRes);
                entry(c, "retention.ms", "3600000", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
                ConfigEntry policy = c.get("cleanup.policy");
                check(policy != null && "delete".equals(policy.value()), "cleanup.policy described as " + policy);
                return c.entries().size() + " entries";
            });
            g.call("incrementalAlterConfigs(topic)", () -> {
                admin.incrementalAlterConfigs(Map.of(topicRes, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("max.message.bytes", "2000000"), AlterConfigOp.OpType.SET))))
                        .all().get(T, TimeUnit.SECONDS);
                poll("the topic's altered configs described", () -> {
                    Config c = configs(admin, topicRes);
                    return "7200000".equals(c.get("retention.ms").value())
                            && "2000000".equals(c.get("max.message.bytes").value());
                });
                admin.incrementalAlterConfigs(Map.of(topicRes, List.of(
                        new AlterConfigOp(new ConfigEntry("max.message.bytes", ""), AlterConfigOp.OpType.DELETE))))
                        .all().get(T, TimeUnit.SECONDS);
                poll("max.message.bytes back to its default", () -> configs(admin, topicRes)
                        .get("max.message.bytes").source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
                entry(configs(admin, topicRes), "retention.ms", "7200000", ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG);
                return null;
            });
            Method legacy = legacyAlterConfigs();
            if (legacy == null) {
                g.notApplicable("alterConfigs(topic)", "Admin.alterConfigs is not in kafka-clients " + clientVersion());
            } else {
                g.call("alterConfigs(topic)", () -> {
                    // legacy semantics: the given set replaces every dynamic config of the topic
                    legacyAlter(legacy, admin, Map.of(topicRes, new Config(List.of(new ConfigEntry("segment.ms", "600000")))));
                    poll("segment.ms set and retention.ms no longer dynamic", () -> {
                        Config c = configs(admin, topicRes);
                        return "600000".equals(c.get("segment.ms").value())
                                && c.get("retention.ms").source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG;
                    });
                    return null;
                });
            }
            g.call("describeConfigs(broker)", () -> {
                Config c = configs(admin, brokerRes);
                check(c.get("num.partitions") != null, "broker " + brokerRes.name() + " describes no num.partitions ("
                      + c.entries().size() + " entries)");
                return c.entries().size() + " entries, num.partitions=" + c.get("num.partitions").value();
            });
            g.call("incrementalAlterConfigs(broker)", () -> {
                admin.incrementalAlterConfigs(Map.of(brokerRes, List.of(
                        new AlterConfigOp(new ConfigEntry("log.retention.ms", "86400000"), AlterConfigOp.OpType.SET))))
                        .all().get(T, TimeUnit.SECONDS);
                poll("broker log.retention.ms described as DYNAMIC_BROKER_CONFIG 86400000", () -> {
                    ConfigEntry e = configs(admin, brokerRes).get("log.retention.ms");
                    return e != null && "86400000".equals(e.value())
                            && e.source() == ConfigEntry.ConfigSource.DYNAMIC_BROKER_CONFIG;
                });
                admin.incrementalAlterConfigs(Map.of(brokerRes, List.of(
                        new AlterConfigOp(new ConfigEntry("log.retention.ms", ""), AlterConfigOp.OpType.DELETE))))
                        .all().get(T, TimeUnit.SECONDS);
                poll("broker log.retention.ms no longer dynamic", () -> {
                    ConfigEntry e = configs(admin, brokerRes).get("log.retention.ms");
                    return e == null || e.source() != ConfigEntry.ConfigSource.DYNAMIC_BROKER_CONFIG;
                });
                return null;
            });
            if (legacy == null) {
                g.notApplicable("alterConfigs(broker)", "Admin.alterConfigs is not in kafka-clients " + clientVersion());
            } else {
                g.call("alterConfigs(broker)", () -> {
                    legacyAlter(legacy, admin, Map.of(brokerRes, new Config(List.of(new ConfigEntry("log.retention.ms", "90000000")))));
                    poll("broker log.retention.ms 90000000 (legacy alterConfigs)", () -> {
                        ConfigEntry e = configs(admin, brokerRes).get("log.retention.ms");
                        return e != null && "90000000".equals(e.value());
                    });
                    legacyAlter(legacy, admin, Map.of(brokerRes, new Config(List.of())));
                    poll("broker log.retention.ms cleared (legacy alterConfigs, empty set)", () -> {
                        ConfigEntry e = configs(admin, brokerRes).get("log.retention.ms");
                        return e == null || e.source() != ConfigEntry.ConfigSource.DYNAMIC_BROKER_CONFIG;
                    });
                    return null;
                });
            }
            g.emit(done);

            // -- cluster ------------------------------------------------------------------------
            g = new Group("cluster-logdirs");
            g.call("describeCluster", () -> {
                DescribeClusterResult r = admin.describeCluster();
                String id = r.clusterId().get(T, TimeUnit.SECONDS);
                Node controller = r.controller().get(T, TimeUnit.SECONDS);
                Collection<Node> nodes = r.nodes().get(T, TimeUnit.SECONDS);
                check(id != null && !id.isEmpty(), "no cluster id");
                check(controller != null && controller.id() >= 0, "no controller: " + controller);
                check(nodes.size() == 3, nodes.size() + " nodes: " + nodes);
                return "cluster " + id + ", controller " + controller.id();
            });
            g.call("describeLogDirs", () -> {
                Map<Integer, Map<String, LogDirDescription>> dirs = admin.describeLogDirs(brokers)
                        .allDescriptions().get(T, TimeUnit.SECONDS);
                check(dirs.keySet().equals(new HashSet<>(brokers)), "log dirs of brokers " + dirs.keySet());
                TopicDescription d = describeTopics(admin, t1).get(t1);
                for (TopicPartitionInfo p : d.partitions())
                    for (Node r : p.replicas()) {
                        boolean found = dirs.get(r.id()).values().stream().anyMatch(ld -> ld.error() == null
                                && ld.replicaInfos().containsKey(new TopicPartition(t1, p.partition())));
                        check(found, "broker " + r.id() + "'s log dirs lack its replica " + t1 + "-" + p.partition());
                    }
                return dirs.values().stream().mapToInt(Map::size).sum() + " log dirs";
            });
            g.emit(done);

            // -- producers and transactions -----------------------------------------------------
            g = new Group("producers-transactions");
            String tt = prefix + "-adm-tx", txid = prefix + "-adm-txid";
            TopicPartition ttp = new TopicPartition(tt, 0);
            createTopic(admin, tt, 1, (short) 3, Map.of());
            KafkaProducer<String, String> tp = producer(bootstrap, Map.of(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txid));
            try {
                tp.initTransactions();
                tp.beginTransaction();
                tp.send(new ProducerRecord<>(tt, 0, null, "open")).get(T, TimeUnit.SECONDS);
                long[] pid = {-1};
                int[] epoch = {-1};
                g.call("describeProducers", () -> {
                    List<ProducerState> ps = admin.describeProducers(List.of(ttp)).all().get(T, TimeUnit.SECONDS)
                            .get(ttp).activeProducers();
                    check(ps.size() == 1, "describeProducers lists " + ps.size() + " producers: " + ps);
                    check(ps.get(0).currentTransactionStartOffset().isPresent()
                          && ps.get(0).currentTransactionStartOffset().getAsLong() == 0,
                          "open transaction not described: " + ps.get(0));
                    pid[0] = ps.get(0).producerId();
                    return ps.get(0).toString();
                });
                g.call("listTransactions", () -> {
                    Collection<TransactionListing> l = admin.listTransactions().all().get(T, TimeUnit.SECONDS);
                    TransactionListing mine = l.stream().filter(x -> x.transactionalId().equals(txid)).findFirst()
                            .orElseThrow(() -> new CheckFailed("listTransactions lacks " + txid + ": " + l));
                    check(mine.state() == TransactionState.ONGOING, txid + " listed as " + mine.state());
                    check(pid[0] < 0 || mine.producerId() == pid[0], "producer id " + mine.producerId() + " != " + pid[0]);
                    return l.size() + " transactions";
                });
                g.call("describeTransactions", () -> {
                    TransactionDescription d = admin.describeTransactions(List.of(txid)).all()
                            .get(T, TimeUnit.SECONDS).get(txid);
                    check(d.state() == TransactionState.ONGOING, txid + " described as " + d.state());
                    check(d.topicPartitions().contains(ttp), txid + " partitions " + d.topicPartitions());
                    epoch[0] = d.producerEpoch();
                    return d.toString();
                });
                g.call("fenceProducers", () -> {
                    admin.fenceProducers(List.of(txid)).all().get(T, TimeUnit.SECONDS);
                    Exception failed = null;
                    try {
                        tp.commitTransaction();
                    } catch (Exception e) {
                        failed = e;
                    }
                    check(failed != null, "the fenced producer's commitTransaction succeeded");
                    poll(txid + " aborted with a bumped epoch", () -> {
                        try {
                            TransactionDescription d = admin.describeTransactions(List.of(txid)).all()
                                    .get(T, TimeUnit.SECONDS).get(txid);
                            return d.producerEpoch() > epoch[0] && (d.state() == TransactionState.COMPLETE_ABORT
                                    || d.state() == TransactionState.EMPTY);
                        } catch (Exception e) {
                            return false;
                        }
                    });
                    return "commit after fencing: " + describe(failed);
                });
            } finally {
                tp.close(Duration.ofSeconds(5));
            }
            g.emit(done);

            // -- consumer groups ----------------------------------------------------------------
            g = new Group("consumer-groups");
            String gt = prefix + "-adm-g", gid = prefix + "-adm-group";
            TopicPartition g0 = new TopicPartition(gt, 0), g1 = new TopicPartition(gt, 1);
            createTopic(admin, gt, 2, (short) 3, Map.of());
            try (KafkaProducer<String, String> p = producer(bootstrap, Map.of())) {
                for (int i = 0; i < 10; i++) p.send(new ProducerRecord<>(gt, i % 2, null, "g" + i));
                p.flush();
            }
            try (KafkaConsumer<String, String> c = consumer(bootstrap, Map.of(ConsumerConfig.GROUP_ID_CONFIG, gid))) {
                c.subscribe(List.of(gt));
                int got = 0;
                long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
                while (got < 10 && System.nanoTime() < deadline) got += c.poll(Duration.ofMillis(500)).count();
                check(got == 10, "the group's consumer read " + got + " of 10 records");
                c.commitSync(Duration.ofSeconds(T));
                g.call("describeConsumerGroups", () -> {
                    ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(gid)).describedGroups()
                            .get(gid).get(T, TimeUnit.SECONDS);
                    check(d.members().size() == 1, d.members().size() + " members");
                    check(d.members().iterator().next().assignment().topicPartitions().equals(Set.of(g0, g1)),
                          "member assigned " + d.members().iterator().next().assignment());
                    check(d.coordinator() != null && d.coordinator().id() >= 0, "no coordinator");
                    check("stable".equalsIgnoreCase(String.valueOf(d.state())), "state " + d.state());
                    check(!d.isSimpleConsumerGroup(), "described as a simple group");
                    return "coordinator " + d.coordinator().id() + ", assignor " + d.partitionAssignor();
                });
                g.call("listConsumerGroups", () -> {
                    Collection<ConsumerGroupListing> l = admin.listConsumerGroups().all().get(T, TimeUnit.SECONDS);
                    check(l.stream().anyMatch(x -> x.groupId().equals(gid)), "listConsumerGroups lacks " + gid);
                    return l.size() + " groups";
                });
            }
            g.call("listConsumerGroupOffsets", () -> {
                Map<TopicPartition, OffsetAndMetadata> o = groupOffsets(admin, gid);
                check(o.get(g0) != null && o.get(g0).offset() == 5 && o.get(g1) != null && o.get(g1).offset() == 5,
                      "committed offsets " + o);
                return null;
            });
            g.call("alterConsumerGroupOffsets", () -> {
                admin.alterConsumerGroupOffsets(gid, Map.of(g0, new OffsetAndMetadata(2, "rewound")))
                        .all().get(T, TimeUnit.SECONDS);
                Map<TopicPartition, OffsetAndMetadata> o = groupOffsets(admin, gid);
                check(o.get(g0) != null && o.get(g0).offset() == 2 && "rewound".equals(o.get(g0).metadata()),
                      "after altering: " + o);
                return null;
            });
            g.call("deleteConsumerGroupOffsets", () -> {
                admin.deleteConsumerGroupOffsets(gid, Set.of(g1)).all().get(T, TimeUnit.SECONDS);
                Map<TopicPartition, OffsetAndMetadata> o = groupOffsets(admin, gid);
                check(o.get(g1) == null && o.get(g0) != null, "after deleting " + g1 + ": " + o);
                return null;
            });
            g.call("deleteConsumerGroups", () -> {
                admin.deleteConsumerGroups(List.of(gid)).all().get(T, TimeUnit.SECONDS);
                poll("listConsumerGroups no longer lists " + gid, () -> {
                    try {
                        return admin.listConsumerGroups().all().get(T, TimeUnit.SECONDS).stream()
                                .noneMatch(x -> x.groupId().equals(gid));
                    } catch (Exception e) {
                        return false;
                    }
                });
                return null;
            });
            g.emit(done);

            // -- delete records -----------------------------------------------------------------
            g = new Group("delete-records");
            g.call("deleteRecords", () -> {
                long low = admin.deleteRecords(Map.of(g0, RecordsToDelete.beforeOffset(3))).lowWatermarks().get(g0)
                        .get(T, TimeUnit.SECONDS).lowWatermark();
                check(low == 3, "low watermark " + low + " after deleting before offset 3");
                poll("the earliest offset of " + g0 + " is 3", () -> {
                    try {
                        return admin.listOffsets(Map.of(g0, OffsetSpec.earliest())).all()
                                .get(T, TimeUnit.SECONDS).get(g0).offset() == 3;
                    } catch (Exception e) {
                        return false;
                    }
                });
                return null;
            });
            g.emit(done);

            // -- ACLs ---------------------------------------------------------------------------
            g = new Group("acls");
            String principal = "User:" + prefix + "-acl-user";
            AclBinding b1 = new AclBinding(new ResourcePattern(ResourceType.TOPIC, prefix + "-acl-topic", PatternType.LITERAL),
                    new AccessControlEntry(principal, "*", AclOperation.READ, AclPermissionType.ALLOW));
            AclBinding b2 = new AclBinding(new ResourcePattern(ResourceType.GROUP, prefix + "-acl-", PatternType.PREFIXED),
                    new AccessControlEntry(principal, "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW));
            AclBindingFilter mine = new AclBindingFilter(ResourcePatternFilter.ANY,
                    new AccessControlEntryFilter(principal, null, AclOperation.ANY, AclPermissionType.ANY));
            g.call("createAcls", () -> {
                admin.createAcls(List.of(b1, b2)).all().get(T, TimeUnit.SECONDS);
                return null;
            });
            g.call("describeAcls", () -> {
                poll("describeAcls lists both new ACLs", () -> {
                    try {
                        return new HashSet<>(admin.describeAcls(mine).values().get(T, TimeUnit.SECONDS))
                                .equals(Set.of(b1, b2));
                    } catch (Exception e) {
                        return false;
                    }
                });
                return null;
            });
            g.call("deleteAcls", () -> {
                Collection<AclBinding> deleted = admin.deleteAcls(List.of(b1.toFilter(), b2.toFilter())).all()
                        .get(T, TimeUnit.SECONDS);
                check(new HashSet<>(deleted).equals(Set.of(b1, b2)), "deleteAcls deleted " + deleted);
                poll("describeAcls lists none", () -> {
                    try {
                        return admin.describeAcls(mine).values().get(T, TimeUnit.SECONDS).isEmpty();
                    } catch (Exception e) {
                        return false;
                    }
                });
                return null;
            });
            g.emit(done);

            // -- SCRAM credentials --------------------------------------------------------------
            g = new Group("scram");
            String user = prefix + "-scram-user";
            g.call("alterUserScramCredentials", () -> {
                admin.alterUserScramCredentials(List.<UserScramCredentialAlteration>of(
                        new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), "pw-256"),
                        new UserScramCredentialUpsertion(user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), "pw-512")))
                        .all().get(T, TimeUnit.SECONDS);
                return null;
            });
            g.call("describeUserScramCredentials", () -> {
                UserScramCredentialsDescription d = admin.describeUserScramCredentials(List.of(user)).description(user)
                        .get(T, TimeUnit.SECONDS);
                Set<String> got = new HashSet<>();
                for (ScramCredentialInfo i : d.credentialInfos()) got.add(i.mechanism() + "/" + i.iterations());
                check(got.equals(Set.of("SCRAM_SHA_256/8192", "SCRAM_SHA_512/4096")), "described " + got);
                check(admin.describeUserScramCredentials().users().get(T, TimeUnit.SECONDS).contains(user),
                      "describing all users lacks " + user);
                return null;
            });
            g.call("alterUserScramCredentials(delete)", () -> {
                admin.alterUserScramCredentials(List.<UserScramCredentialAlteration>of(
                        new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256))).all().get(T, TimeUnit.SECONDS);
                UserScramCredentialsDescription d = admin.describeUserScramCredentials(List.of(user)).description(user)
                        .get(T, TimeUnit.SECONDS);
                check(d.credentialInfos().size() == 1 && d.credentialInfos().get(0).mechanism() == ScramMechanism.SCRAM_SHA_512,
                      "after deleting SCRAM-SHA-256: " + d.credentialInfos());
                admin.alterUserScramCredentials(List.<UserScramCredentialAlteration>of(
                        new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512))).all().get(T, TimeUnit.SECONDS);
                try {
                    UserScramCredentialsDescription gone = admin.describeUserScramCredentials(List.of(user))
                            .description(user).get(T, TimeUnit.SECONDS);
                    throw new CheckFailed("a user without credentials is still described: " + gone);
                } catch (java.util.concurrent.ExecutionException e) {
                    check(e.getCause() instanceof ResourceNotFoundException, "describing a deleted user: " + describe(e));
                }
                return null;
            });
            g.emit(done);

            // -- client quotas ------------------------------------------------------------------
            g = new Group("quotas");
            ClientQuotaEntity entity = new ClientQuotaEntity(Map.of(ClientQuotaEntity.USER, prefix + "-quser",
                                                                    ClientQuotaEntity.CLIENT_ID, prefix + "-qclient"));
            ClientQuotaFilter filter = ClientQuotaFilter.containsOnly(List.of(
                    ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, prefix + "-quser"),
                    ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.CLIENT_ID, prefix + "-qclient")));
            g.call("alterClientQuotas", () -> {
                admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                        new ClientQuotaAlteration.Op("producer_byte_rate", 1048576.0),
                        new ClientQuotaAlteration.Op("consumer_byte_rate", 2097152.0))))).all().get(T, TimeUnit.SECONDS);
                return null;
            });
            g.call("describeClientQuotas", () -> {
                Map<ClientQuotaEntity, Map<String, Double>> q = admin.describeClientQuotas(filter).entities()
                        .get(T, TimeUnit.SECONDS);
                check(q.equals(Map.of(entity, Map.of("producer_byte_rate", 1048576.0, "consumer_byte_rate", 2097152.0))),
                      "described " + q);
                return null;
            });
            g.call("alterClientQuotas(remove)", () -> {
                admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity, List.of(
                        new ClientQuotaAlteration.Op("producer_byte_rate", null),
                        new ClientQuotaAlteration.Op("consumer_byte_rate", null))))).all().get(T, TimeUnit.SECONDS);
                Map<ClientQuotaEntity, Map<String, Double>> q = admin.describeClientQuotas(filter).entities()
                        .get(T, TimeUnit.SECONDS);
                check(q.isEmpty(), "after removing: " + q);
                return null;
            });
            g.emit(done);

            // -- reassignment and preferred leader election -------------------------------------
            g = new Group("reassign-elect");
            String rt = prefix + "-adm-re";
            TopicPartition r0 = new TopicPartition(rt, 0), r1 = new TopicPartition(rt, 1);
            Map<Integer, TopicPartitionInfo> parts = createTopic(admin, rt, 2, (short) 2, Map.of());
            List<Integer> old0 = ids(parts.get(0).replicas()), old1 = ids(parts.get(1).replicas());
            int spare = brokers.stream().filter(b -> !old0.contains(b)).findFirst().orElseThrow();
            List<Integer> new0 = List.of(old0.get(1), spare);           // a replica moves
            List<Integer> new1 = List.of(old1.get(1), old1.get(0));     // the preferred leader changes
            g.call("alterPartitionReassignments", () -> {
                admin.alterPartitionReassignments(Map.of(
                        r0, Optional.of(new NewPartitionReassignment(new0)),
                        r1, Optional.of(new NewPartitionReassignment(new1)))).all().get(T, TimeUnit.SECONDS);
                return rt + "-0 " + old0 + " -> " + new0 + ", " + rt + "-1 " + old1 + " -> " + new1;
            });
            g.call("listPartitionReassignments", () -> {
                Map<TopicPartition, PartitionReassignment> ongoing = admin.listPartitionReassignments(Set.of(r0, r1))
                        .reassignments().get(T, TimeUnit.SECONDS);
                for (Map.Entry<TopicPartition, PartitionReassignment> e : ongoing.entrySet()) {
                    List<Integer> want = e.getKey().equals(r0) ? new0 : new1;
                    check(e.getValue().replicas().containsAll(want), "ongoing reassignment of " + e.getKey()
                          + " has replicas " + e.getValue().replicas() + ", want them to include " + want);
                }
                poll("both reassignments complete (replicas " + new0 + ", " + new1 + ")", () -> {
                    try {
                        TopicDescription d = describeTopics(admin, rt).get(rt);
                        return ids(d.partitions().get(0).replicas()).equals(new0)
                                && ids(d.partitions().get(1).replicas()).equals(new1)
                                && admin.listPartitionReassignments(Set.of(r0, r1)).reassignments()
                                        .get(T, TimeUnit.SECONDS).isEmpty();
                    } catch (Exception e) {
                        return false;
                    }
                });
                return ongoing.size() + " ongoing when first listed";
            });
            g.call("electLeaders(preferred)", () -> {
                Map<TopicPartition, Optional<Throwable>> r = admin.electLeaders(ElectionType.PREFERRED, Set.of(r1))
                        .partitions().get(T, TimeUnit.SECONDS);
                Optional<Throwable> err = r.get(r1);
                check(err != null, "no answer for " + r1 + ": " + r);
                String note = "elected";
                if (err.isPresent()) {
                    check(err.get() instanceof ElectionNotNeededException, "electing " + r1 + ": " + describe(err.get()));
                    note = "election not needed";
                }
                poll(r1 + " led by its preferred replica " + new1.get(0), () -> {
                    Node leader = describeTopics(admin, rt).get(rt).partitions().get(1).leader();
                    return leader != null && leader.id() == new1.get(0);
                });
                return note;
            });
            g.emit(done);

            admin.deleteTopics(List.of(t1, tt, gt, rt)).all().get(T, TimeUnit.SECONDS);
        }
        List<String> failed = new ArrayList<>();
        for (Group x : done)
            for (Map.Entry<String, Object> e : x.calls.entrySet())
                if (!(Boolean) ((Map<?, ?>) e.getValue()).get("ok"))
                    failed.add(e.getKey() + ": " + ((Map<?, ?>) e.getValue()).get("error"));
        check(failed.isEmpty(), failed.size() + " Admin calls failed: " + String.join("; ", failed));
        Map<String, Object> out = obj();
        out.put("groups", done.size());
        return out;
    }

    // -- helpers -----------------------------------------------------------------------------
    static Set<String> names(Admin admin) {
        try {
            return admin.listTopics().names().get(T, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new RuntimeException(e);
        }
    }

    static Map<String, TopicDescription> describeTopics(Admin admin, String... topics) {
        try {
            return admin.describeTopics(List.of(topics)).allTopicNames().get(T, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new RuntimeException(Common.describe(e), e);
        }
    }

    static Config configs(Admin admin, ConfigResource r) {
        try {
            return admin.describeConfigs(List.of(r)).all().get(T, TimeUnit.SECONDS).get(r);
        } catch (Exception e) {
            throw new RuntimeException(Common.describe(e), e);
        }
    }

    static void entry(Config c, String name, String value, ConfigEntry.ConfigSource source) {
        ConfigEntry e = c.get(name);
        check(e != null, name + " not described");
        check(value.equals(e.value()) && e.source() == source,
              name + " described as " + e.value() + " (" + e.source() + "), want " + value + " (" + source + ")");
    }

    static Map<TopicPartition, OffsetAndMetadata> groupOffsets(Admin admin, String gid) throws Exception {
        Map<TopicPartition, OffsetAndMetadata> o = new HashMap<>(admin.listConsumerGroupOffsets(gid)
                .partitionsToOffsetAndMetadata().get(T, TimeUnit.SECONDS));
        o.values().removeIf(x -> x == null);
        return o;
    }

    static List<Integer> ids(List<Node> nodes) {
        List<Integer> out = new ArrayList<>();
        for (Node n : nodes) out.add(n.id());
        return out;
    }

    static void legacyAlter(Method legacy, Admin admin, Map<ConfigResource, Config> configs) throws Exception {
        ((org.apache.kafka.clients.admin.AlterConfigsResult) legacy.invoke(admin, configs)).all().get(T, TimeUnit.SECONDS);
    }

    static Method legacyAlterConfigs() {
        try {
            return Admin.class.getMethod("alterConfigs", Map.class);
        } catch (NoSuchMethodException e) {
            return null;
        }
    }
}
