package org.ackspec.shim;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

/** A library's version from the Maven metadata the shaded jar keeps (its manifests are merged away). */
final class Versions {
    private Versions() {}

    static String of(String group, String artifact) {
        String path = "/META-INF/maven/" + group + "/" + artifact + "/pom.properties";
        try (InputStream in = Versions.class.getResourceAsStream(path)) {
            if (in == null) {
                return "?";
            }
            Properties properties = new Properties();
            properties.load(in);
            return properties.getProperty("version", "?");
        } catch (IOException e) {
            return "?";
        }
    }
}
