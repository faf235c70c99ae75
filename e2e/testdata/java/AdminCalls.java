import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterClientQuotasOptions;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;

/**
 * Calls the Java AdminClient, one call per stdin line, and prints each
 * call's outcome in a form that does not depend on the order the server
 * sent things in (entities, values and configs sorted), so that the same
 * calls against the real broker and against Tollgate can be compared
 * line for line. Lines are tab-separated:
 *
 *   quota-alter     entity ops validate   entity "user=u,client-id=" (empty name: the default),
 *                                         ops "producer_byte_rate=1024;request_percentage=" (empty: remove)
 *   quota-describe  strict components     "user:exact:u,client-id:any", "user:default", "ip:exact:1.2.3.4"
 *   scram-upsert    user mechanism iterations password
 *   scram-delete    user mechanism
 *   scram-describe  users                 "u1,u2"
 *   config-describe broker names          broker "" for the cluster default; names "a,b"
 *   config-alter    broker op key value   op SET, DELETE, APPEND, SUBTRACT
 *   sleep           ms
 *
 * Each outcome is "=== <n> <line>" and then its lines; an error is
 * "error <exception class>: <message>".
 */
public class AdminCalls {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(p)) {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            int n = 0;
            for (String line; (line = in.readLine()) != null; ) {
                if (line.isEmpty()) {
                    continue;
                }
                String[] f = line.split("\t", -1);
                if (f[0].equals("sleep")) {
                    Thread.sleep(Long.parseLong(f[1]));
                    continue;
                }
                System.out.println("=== " + n++ + " " + line.replace('\t', ' '));
                List<String> out = new ArrayList<>();
                try {
                    call(admin, f, out);
                } catch (ExecutionException e) {
                    out.add(error(e.getCause()));
                } catch (RuntimeException e) {
                    out.add(error(e));
                }
                for (String o : out) {
                    System.out.println(o);
                }
            }
            System.out.println("=== end");
        }
    }

    static String error(Throwable t) {
        return "error " + t.getClass().getSimpleName() + ": " + t.getMessage();
    }

    static void call(Admin admin, String[] f, List<String> out) throws Exception {
        switch (f[0]) {
            case "quota-alter": {
                List<ClientQuotaAlteration.Op> ops = new ArrayList<>();
                for (String kv : f[2].split(";")) {
                    String[] e = kv.split("=", 2);
                    ops.add(new ClientQuotaAlteration.Op(e[0], e[1].isEmpty() ? null : Double.valueOf(e[1])));
                }
                admin.alterClientQuotas(Collections.singletonList(new ClientQuotaAlteration(entity(f[1]), ops)),
                        new AlterClientQuotasOptions().validateOnly(Boolean.parseBoolean(f[3]))).all().get();
                out.add("ok");
                break;
            }
            case "quota-describe": {
                List<ClientQuotaFilterComponent> comps = new ArrayList<>();
                for (String c : f[2].split(",")) {
                    String[] e = c.split(":", 3);
                    switch (e[1]) {
                        case "exact":
                            comps.add(ClientQuotaFilterComponent.ofEntity(e[0], e[2]));
                            break;
                        case "default":
                            comps.add(ClientQuotaFilterComponent.ofDefaultEntity(e[0]));
                            break;
                        default:
                            comps.add(ClientQuotaFilterComponent.ofEntityType(e[0]));
                    }
                }
                ClientQuotaFilter filter = Boolean.parseBoolean(f[1]) ? ClientQuotaFilter.containsOnly(comps) : ClientQuotaFilter.contains(comps);
                Map<ClientQuotaEntity, Map<String, Double>> got = admin.describeClientQuotas(filter).entities().get();
                TreeMap<String, String> sorted = new TreeMap<>();
                for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e : got.entrySet()) {
                    sorted.put(name(e.getKey()), new TreeMap<>(e.getValue()).toString());
                }
                for (Map.Entry<String, String> e : sorted.entrySet()) {
                    out.add(e.getKey() + " " + e.getValue());
                }
                out.add(got.size() + " entities");
                break;
            }
            case "scram-upsert": {
                UserScramCredentialAlteration a = new UserScramCredentialUpsertion(f[1],
                        new ScramCredentialInfo(ScramMechanism.fromMechanismName(f[2]), Integer.parseInt(f[3])), f[4]);
                admin.alterUserScramCredentials(Collections.singletonList(a)).all().get();
                out.add("ok");
                break;
            }
            case "scram-delete": {
                UserScramCredentialAlteration a = new UserScramCredentialDeletion(f[1], ScramMechanism.fromMechanismName(f[2]));
                admin.alterUserScramCredentials(Collections.singletonList(a)).all().get();
                out.add("ok");
                break;
            }
            case "scram-describe": {
                List<String> users = Arrays.asList(f[1].split(","));
                Map<String, UserScramCredentialsDescription> got = admin.describeUserScramCredentials(users).all().get();
                for (String u : new TreeMap<>(got).keySet()) {
                    List<String> creds = new ArrayList<>();
                    for (ScramCredentialInfo i : got.get(u).credentialInfos()) {
                        creds.add(i.mechanism() + "/" + i.iterations());
                    }
                    Collections.sort(creds);
                    out.add(u + " " + creds);
                }
                break;
            }
            case "config-describe": {
                ConfigResource r = new ConfigResource(ConfigResource.Type.BROKER, f[1]);
                Config c = admin.describeConfigs(Collections.singletonList(r), new DescribeConfigsOptions().includeSynonyms(true))
                        .all().get().get(r);
                List<String> names = Arrays.asList(f[2].split(","));
                TreeMap<String, String> sorted = new TreeMap<>();
                for (ConfigEntry e : c.entries()) {
                    if (names.contains(e.name())) {
                        List<String> syn = new ArrayList<>();
                        for (ConfigEntry.ConfigSynonym s : e.synonyms()) {
                            syn.add(s.source() + ":" + s.value());
                        }
                        sorted.put(e.name(), e.value() + " source=" + e.source() + " default=" + e.isDefault()
                                + " sensitive=" + e.isSensitive() + " readOnly=" + e.isReadOnly() + " type=" + e.type() + " synonyms=" + syn);
                    }
                }
                for (Map.Entry<String, String> e : sorted.entrySet()) {
                    out.add(e.getKey() + "=" + e.getValue());
                }
                break;
            }
            case "config-alter": {
                ConfigResource r = new ConfigResource(ConfigResource.Type.BROKER, f[1]);
                AlterConfigOp op = new AlterConfigOp(new ConfigEntry(f[3], f[4]), AlterConfigOp.OpType.valueOf(f[2]));
                Map<ConfigResource, Collection<AlterConfigOp>> m = Collections.singletonMap(r, Collections.singletonList(op));
                admin.incrementalAlterConfigs(m).all().get();
                out.add("ok");
                break;
            }
            default:
                throw new IllegalArgumentException("unknown call " + f[0]);
        }
    }

    static ClientQuotaEntity entity(String spec) {
        Map<String, String> m = new TreeMap<>();
        for (String c : spec.split(",")) {
            String[] e = c.split("=", 2);
            m.put(e[0], e[1].isEmpty() ? null : e[1]);
        }
        return new ClientQuotaEntity(m);
    }

    static String name(ClientQuotaEntity e) {
        List<String> parts = new ArrayList<>();
        for (Map.Entry<String, String> c : new TreeMap<>(e.entries()).entrySet()) {
            parts.add(c.getKey() + "=" + (c.getValue() == null ? "<default>" : c.getValue()));
        }
        return String.join(",", parts);
    }
}
