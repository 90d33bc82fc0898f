# Google's Cloud Firestore emulator on a free loopback port, for the oracle layer's calibration
# (scripts/firestore_system_tests.sh --baseline). Sourced after scripts/lib.sh.
# shellcheck shell=bash
#
# start_firestore_emulator finds the emulator's jar, starts it, waits (60 s at most) until it
# answers on its port, sets FIRESTORE_EMULATOR_HOST, EMULATOR_VERSION, EMULATOR_SOURCE and
# JAVA_VERSION, and stops it when the calling script exits. The jar, first found of:
#   - FIRESTORE_EMULATOR_JAR;
#   - Google's Debian package google-cloud-cli-firestore-emulator (gcloud's emulator);
#   - firebase-tools' download: firebase-tools FIREBASE_TOOLS_VERSION (default 15.34.2, the
#     newest at the time, runs on Node 20) installed with npm into target/firebase-tools, then
#     `firebase setup:emulators:firestore`, which fetches the jar it pins from Google's storage
#     into ~/.cache/firebase/emulators (firebase-tools refuses a Java older than 21, and its jar
#     may need one too: set JAVA).
# JAVA: the java binary (default: java on PATH). The emulator's log: target/firestore-emulator/.

FIRESTORE_EMULATOR_DEB_JAR=/usr/lib/google-cloud-sdk/platform/cloud-firestore-emulator/cloud-firestore-emulator.jar
FIRESTORE_EMULATOR_CLASS=com.google.cloud.datastore.emulator.firestore.CloudFirestore

# Sets EMULATOR_JAR to the jar's path and EMULATOR_SOURCE to where it came from.
find_firestore_emulator_jar() {
  if [ -n "${FIRESTORE_EMULATOR_JAR:-}" ]; then
    [ -f "${FIRESTORE_EMULATOR_JAR}" ] || die "FIRESTORE_EMULATOR_JAR=${FIRESTORE_EMULATOR_JAR}: no such file"
    EMULATOR_JAR="${FIRESTORE_EMULATOR_JAR}"
    EMULATOR_SOURCE="FIRESTORE_EMULATOR_JAR $(basename "${EMULATOR_JAR}")"
    return
  fi
  if [ -f "${FIRESTORE_EMULATOR_DEB_JAR}" ]; then
    EMULATOR_JAR="${FIRESTORE_EMULATOR_DEB_JAR}"
    EMULATOR_SOURCE="Debian package google-cloud-cli-firestore-emulator $(dpkg-query -W -f '${Version}' google-cloud-cli-firestore-emulator 2>/dev/null || echo '(version unknown)')"
    return
  fi
  local tools="${ROOT}/target/firebase-tools" version="${FIREBASE_TOOLS_VERSION:-15.34.2}"
  if [ "$(cat "${tools}/version" 2>/dev/null || true)" != "${version}" ]; then
    say "installing firebase-tools ${version} into target/firebase-tools (npm)"
    mkdir -p "${tools}"
    npm install --prefix "${tools}" --no-audit --no-fund --loglevel=error "firebase-tools@${version}"
    echo "${version}" > "${tools}/version"
  fi
  "${tools}/node_modules/.bin/firebase" setup:emulators:firestore ||
    die "firebase-tools ${version} could not download the Firestore emulator (see above); set FIRESTORE_EMULATOR_JAR to a cloud-firestore-emulator jar or install google-cloud-cli-firestore-emulator"
  EMULATOR_JAR="$(find "${HOME}/.cache/firebase/emulators" -name 'cloud-firestore-emulator-v*.jar' 2>/dev/null | sort -V | tail -n 1)"
  [ -n "${EMULATOR_JAR}" ] || die "firebase setup:emulators:firestore left no jar in ~/.cache/firebase/emulators"
  EMULATOR_SOURCE="firebase-tools ${version}, $(basename "${EMULATOR_JAR}")"
}

start_firestore_emulator() {
  local java="${JAVA:-java}" logs="${ROOT}/target/firestore-emulator" port waited=0 launch
  command -v "${java}" >/dev/null || die "the emulator needs Java (set JAVA to the java binary)"
  find_firestore_emulator_jar
  # gcloud's jar names no Main-Class (gcloud starts the class); firebase-tools' is run with -jar.
  if unzip -p "${EMULATOR_JAR}" META-INF/MANIFEST.MF 2>/dev/null | grep -q '^Main-Class:'; then
    launch=(-jar "${EMULATOR_JAR}")
  else
    launch=(-cp "${EMULATOR_JAR}" "${FIRESTORE_EMULATOR_CLASS}")
  fi
  EMULATOR_VERSION="$("${java}" "${launch[@]}" --version 2>/dev/null | sed -n 's/^cloud-firestore-emulator //p' | head -n 1)"
  EMULATOR_VERSION="${EMULATOR_VERSION:-(version unknown)}"
  JAVA_VERSION="$("${java}" -version 2>&1 | head -n 1)"
  port="$(free_port 18480)"
  mkdir -p "${logs}"
  say "Cloud Firestore emulator ${EMULATOR_VERSION} (${EMULATOR_SOURCE}) on 127.0.0.1:${port}"
  "${java}" -Duser.language=en "${launch[@]}" start --host=127.0.0.1 --port="${port}" \
    > "${logs}/emulator.log" 2>&1 &
  FIRESTORE_EMULATOR_PID=$!
  trap stop_firestore_emulator EXIT
  until (exec 3<>"/dev/tcp/127.0.0.1/${port}") 2>/dev/null; do
    kill -0 "${FIRESTORE_EMULATOR_PID}" 2>/dev/null ||
      die "the emulator exited (target/firestore-emulator/emulator.log: $(tail -n 3 "${logs}/emulator.log"))"
    [ "${waited}" -lt 60 ] || die "the emulator did not listen on ${port} within 60 s"
    sleep 1
    waited=$((waited + 1))
  done
  export FIRESTORE_EMULATOR_HOST="127.0.0.1:${port}"
}

stop_firestore_emulator() {
  if [ -n "${FIRESTORE_EMULATOR_PID:-}" ]; then
    kill "${FIRESTORE_EMULATOR_PID}" 2>/dev/null || true
    wait "${FIRESTORE_EMULATOR_PID}" 2>/dev/null || true
    FIRESTORE_EMULATOR_PID=""
  fi
}
