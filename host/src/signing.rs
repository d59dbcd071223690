//! Detached plugin signatures in the minisign format (Ed25519), verified
//! offline against the public keys given with `--verify`.
//!
//! A plugin `NAME.wasm` is signed by `NAME.wasm.minisig` beside it (what
//! `minisign -Sm NAME.wasm` and `wasm-mcp sign` write). Keys are minisign
//! public keys: a `.pub` file or the bare base64 line. Only prehashed
//! (BLAKE2b) signatures are accepted, and the signature's trusted comment
//! is covered by the global signature as minisign defines.

use std::io::Cursor;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use minisign::{KeyPair, PublicKey, PublicKeyBox, SecretKey, SecretKeyBox, SignatureBox};

/// The signature file of a plugin: `<plugin file>.minisig`.
pub fn signature_path(plugin: &Path) -> PathBuf {
    let mut name = plugin.as_os_str().to_owned();
    name.push(".minisig");
    PathBuf::from(name)
}

/// Largest signature file read (a minisign signature is under 1 KiB;
/// its trusted comment is one line).
pub const MAX_SIGNATURE_BYTES: u64 = 64 << 10;

/// The text of `plugin`'s signature file: `None` when there is none;
/// refused when it is not a regular file (a link to `/dev/zero` or a
/// FIFO), larger than [`MAX_SIGNATURE_BYTES`], or not UTF-8.
pub fn read_signature(plugin: &Path) -> Result<Option<String>> {
    use std::io::Read;
    let path = signature_path(plugin);
    let file = match crate::operator_paths::open_without_blocking(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => bail!("cannot open its signature file {}: {e}", path.display()),
    };
    anyhow::ensure!(
        file.metadata()?.is_file(),
        "its signature file {} is not a regular file",
        path.display()
    );
    let mut bytes = Vec::new();
    file.take(MAX_SIGNATURE_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    anyhow::ensure!(
        bytes.len() as u64 <= MAX_SIGNATURE_BYTES,
        "its signature file {} is over {MAX_SIGNATURE_BYTES} bytes: not a minisign signature",
        path.display()
    );
    String::from_utf8(bytes).map(Some).map_err(|_| {
        anyhow!(
            "its signature file {} is not a minisign signature (not UTF-8)",
            path.display()
        )
    })
}

/// One trusted public key.
#[derive(Clone)]
pub struct TrustedKey {
    key: PublicKey,
    /// Where it came from (for messages).
    pub origin: String,
}

impl std::fmt::Debug for TrustedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TrustedKey({})", self.origin)
    }
}

impl TrustedKey {
    /// A minisign public key file, or the key's base64 line itself.
    pub fn load(spec: &str) -> Result<TrustedKey> {
        let key = if Path::new(spec).is_file() {
            let text = std::fs::read_to_string(spec)
                .with_context(|| format!("reading public key {spec}"))?;
            parse_public_key(&text)
        } else {
            PublicKey::from_base64(spec.trim()).map_err(|e| anyhow!("{e}"))
        }
        .with_context(|| format!("--verify {spec}: not a minisign public key"))?;
        Ok(TrustedKey {
            key,
            origin: spec.to_string(),
        })
    }
}

impl TrustedKey {
    /// A minisign public key's base64 line (as a lock file lists it).
    pub fn from_base64(b64: &str, origin: &str) -> Result<TrustedKey> {
        let key = PublicKey::from_base64(b64.trim())
            .map_err(|e| anyhow!("{origin}: {b64:?} is not a minisign public key: {e}"))?;
        Ok(TrustedKey {
            key,
            origin: origin.to_string(),
        })
    }

    /// The key's base64 line.
    pub fn to_base64(&self) -> String {
        self.key.to_base64()
    }
}

fn parse_public_key(text: &str) -> Result<PublicKey> {
    let boxed = if text.trim_start().starts_with("untrusted comment:") {
        PublicKeyBox::from_string(text)
    } else {
        return PublicKey::from_base64(text.trim()).map_err(|e| anyhow!("{e}"));
    };
    boxed
        .and_then(PublicKeyBox::into_public_key)
        .map_err(|e| anyhow!("{e}"))
}

/// Checks that `signature` (the text of a `.minisig` file, if there is
/// one) signs `bytes` under one of `keys`.
pub fn verify(
    name: &str,
    bytes: &[u8],
    signature: Option<&str>,
    keys: &[TrustedKey],
) -> Result<()> {
    let Some(text) = signature else {
        bail!("plugin {name:?} has no signature (expected {name}.wasm.minisig beside it) and --verify is set");
    };
    let sig = SignatureBox::from_string(text).map_err(|e| {
        anyhow!("plugin {name:?}: its signature file is not a minisign signature: {e}")
    })?;
    let ok = keys
        .iter()
        .any(|k| minisign::verify(&k.key, &sig, Cursor::new(bytes), true, false, false).is_ok());
    if !ok {
        bail!("plugin {name:?}: its signature does not verify against any trusted key (--verify)");
    }
    Ok(())
}

/// Writes a new key pair without a password (`wasm-mcp keygen`, for tests
/// and automation; use the `minisign` tool for password-protected keys).
pub fn keygen(secret: &Path, public: &Path) -> Result<()> {
    let kp = KeyPair::generate_unencrypted_keypair().map_err(|e| anyhow!("{e}"))?;
    let pk = kp.pk.to_box().map_err(|e| anyhow!("{e}"))?.into_string();
    let sk = kp
        .sk
        .to_box(None)
        .map_err(|e| anyhow!("{e}"))?
        .into_string();
    // Both files are made before either is written, and a failure leaves
    // neither: a refused public path used to leave a new secret key behind.
    let secret_file = create_new(secret, 0o600)?;
    let public_file = create_new(public, 0o644).inspect_err(|_| {
        let _ = std::fs::remove_file(secret);
    })?;
    let written =
        write_all(secret_file, secret, &sk).and_then(|()| write_all(public_file, public, &pk));
    if written.is_err() {
        let _ = std::fs::remove_file(secret);
        let _ = std::fs::remove_file(public);
    }
    written
}

/// Creates a new file at `path` with `mode`: an existing file (or symlink)
/// is refused, not overwritten or written through. keygen wrote the secret
/// key readable by everyone, and replaced an existing key without a word
/// (a helper's find).
fn create_new(path: &Path, mode: u32) -> Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .with_context(|| format!("creating {} (it must not exist yet)", path.display()))
}

fn write_all(mut file: std::fs::File, path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    file.write_all(text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// Signs `plugin` with the (unencrypted) secret key file `secret`, writing
/// `<plugin>.minisig`; returns that path.
pub fn sign(plugin: &Path, secret: &Path) -> Result<PathBuf> {
    let text = std::fs::read_to_string(secret)
        .with_context(|| format!("reading secret key {}", secret.display()))?;
    let sk = SecretKeyBox::from_string(&text)
        .and_then(SecretKey::from_unencrypted_box)
        .map_err(|e| anyhow!("{}: {e}", secret.display()))?;
    let bytes = std::fs::read(plugin).with_context(|| format!("reading {}", plugin.display()))?;
    let sig = minisign::sign(None, &sk, Cursor::new(bytes), None, None)
        .map_err(|e| anyhow!("signing {}: {e}", plugin.display()))?;
    let out = signature_path(plugin);
    std::fs::write(&out, sig.into_string())
        .with_context(|| format!("writing {}", out.display()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The secret key is readable by its owner only, and keygen overwrites
    /// nothing (nor writes through a symlink).
    #[test]
    fn keygen_keeps_the_secret_private_and_overwrites_nothing() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        keygen(&d.join("k.key"), &d.join("k.pub")).unwrap();
        let mode = std::fs::metadata(d.join("k.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let before = std::fs::read(d.join("k.key")).unwrap();
        assert!(keygen(&d.join("k.key"), &d.join("other.pub")).is_err());
        assert_eq!(std::fs::read(d.join("k.key")).unwrap(), before);
        std::os::unix::fs::symlink(d.join("target"), d.join("link.pub")).unwrap();
        assert!(keygen(&d.join("new.key"), &d.join("link.pub")).is_err());
        assert!(!d.join("target").exists());
    }

    /// A refused public key path leaves no new secret key behind (and the
    /// existing public key as it was).
    #[test]
    fn a_refused_keygen_leaves_no_key_behind() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("taken.pub"), "theirs").unwrap();
        let e = keygen(&d.join("new.key"), &d.join("taken.pub")).unwrap_err();
        assert!(format!("{e:#}").contains("taken.pub"), "{e:#}");
        assert!(!d.join("new.key").exists(), "a secret key was left behind");
        assert_eq!(
            std::fs::read_to_string(d.join("taken.pub")).unwrap(),
            "theirs"
        );
    }

    #[test]
    fn a_signature_verifies_only_for_its_bytes_and_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        keygen(&d.join("a.key"), &d.join("a.pub")).unwrap();
        keygen(&d.join("b.key"), &d.join("b.pub")).unwrap();
        std::fs::write(d.join("p.wasm"), b"plugin bytes").unwrap();
        let sig_path = sign(&d.join("p.wasm"), &d.join("a.key")).unwrap();
        let sig = std::fs::read_to_string(sig_path).unwrap();
        let a = TrustedKey::load(d.join("a.pub").to_str().unwrap()).unwrap();
        let b = TrustedKey::load(d.join("b.pub").to_str().unwrap()).unwrap();
        let (only_a, only_b) = (vec![a.clone()], vec![b.clone()]);
        assert!(verify("p", b"plugin bytes", Some(&sig), &only_a).is_ok());
        assert!(verify("p", b"plugin bytez", Some(&sig), &only_a).is_err());
        assert!(verify("p", b"plugin bytes", Some(&sig), &only_b).is_err());
        assert!(verify("p", b"plugin bytes", Some(&sig), &[b, a.clone()]).is_ok());
        assert!(verify("p", b"plugin bytes", None, &only_a).is_err());
        assert!(verify("p", b"plugin bytes", Some("garbage"), &[a]).is_err());
    }
}
