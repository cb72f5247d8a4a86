import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, join } from 'node:path';
import { AssetHashType, DockerImage, RemovalPolicy, Token } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type { Construct } from 'constructs';
import { repoRoot } from '../bundling.js';

/*
 * The ffmpeg test runs encode their video with, as a Lambda layer (ffmpeg at /opt/bin/ffmpeg). Three
 * sources, in this order:
 * - `ffmpegLayerArn`: an existing x86_64 layer version the operator publishes (an override);
 * - `ffmpegLayerPath`: a local directory with `bin/ffmpeg`, or a .zip, published as a layer of the stack;
 * - neither (the default): the static x86_64 build that the npm package `@ffmpeg-installer/linux-x64`
 *   carries (ffmpeg 4.1, John Van Sickle's static build, GPLv3; with libx264, which the executor encodes
 *   with, and libvpx), an optional dependency of this project, so `npm ci` on linux-x64 installs it and
 *   synthesis stays offline. On another platform npm skips it: give the ARN or the path there.
 * Building the default layer copies the binary (68 MB, about 25 MB zipped) into the asset at synth with
 * CDK's local bundling (no Docker), hashed by the package's version rather than by its bytes.
 */

/** Where a layer's binary lands in the function (LAMBDA_FFMPEG_PATH of ports/browser/lambda-chromium.ts). */
export const ffmpegPath = '/opt/bin/ffmpeg';

/** The npm package whose static ffmpeg is the default layer. */
export const FFMPEG_PACKAGE = '@ffmpeg-installer/linux-x64';

/** A Lambda layer version ARN. */
const layerVersionArn = /^arn:[\w-]+:lambda:[\w-]+:\d{12}:layer:[A-Za-z0-9_-]+:\d+$/;

export interface FfmpegLayerSource {
  /** An existing layer version's ARN (exclusive with `ffmpegLayerPath`). @default - the packaged build */
  ffmpegLayerArn?: string;
  /** A directory with `bin/ffmpeg`, or a .zip, relative to the repository root. @default - the packaged build */
  ffmpegLayerPath?: string;
}

/** The packaged ffmpeg: its directory and version, or undefined when npm did not install it (not linux-x64). */
export function packagedFfmpeg(): { dir: string; version: string } | undefined {
  try {
    const manifest = createRequire(import.meta.url).resolve(`${FFMPEG_PACKAGE}/package.json`);
    const dir = dirname(manifest);
    if (!existsSync(join(dir, 'ffmpeg'))) return undefined;
    return { dir, version: (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version };
  } catch {
    return undefined;
  }
}

/** The ffmpeg layer test runs record with: the operator's (ARN or path), else the packaged build. */
export function ffmpegLayer(scope: Construct, source: FfmpegLayerSource): lambda.ILayerVersion {
  const { ffmpegLayerArn: arn, ffmpegLayerPath: path } = source;
  if (arn !== undefined && path !== undefined)
    throw new Error('ffmpegLayerArn and ffmpegLayerPath are exclusive: name one ffmpeg layer');
  if (arn !== undefined) {
    if (!Token.isUnresolved(arn) && !layerVersionArn.test(arn))
      throw new Error(
        `ffmpegLayerArn must be a layer version ARN (arn:aws:lambda:<region>:<account>:layer:<name>:<version>, got "${arn}")`,
      );
    return lambda.LayerVersion.fromLayerVersionArn(scope, 'FfmpegLayer', arn);
  }
  return new lambda.LayerVersion(scope, 'FfmpegLayer', {
    code: path === undefined ? packagedCode() : pathCode(path),
    compatibleArchitectures: [lambda.Architecture.X86_64],
    compatibleRuntimes: [lambda.Runtime.NODEJS_22_X],
    description:
      path === undefined
        ? `ffmpeg for test-run videos (/opt/bin/ffmpeg), from ${FFMPEG_PACKAGE}`
        : 'ffmpeg for test-run videos (/opt/bin/ffmpeg)',
    removalPolicy: RemovalPolicy.DESTROY,
  });
}

function pathCode(path: string): lambda.Code {
  const full = isAbsolute(path) ? path : join(repoRoot, path);
  const isZip = full.endsWith('.zip') && existsSync(full) && statSync(full).isFile();
  if (!isZip && !existsSync(join(full, 'bin', 'ffmpeg')))
    throw new Error(`ffmpegLayerPath must be a .zip or a directory with bin/ffmpeg (got "${path}")`);
  return lambda.Code.fromAsset(full);
}

function packagedCode(): lambda.Code {
  const packaged = packagedFfmpeg();
  if (!packaged)
    throw new Error(
      `${FFMPEG_PACKAGE} is not installed (npm installs it on linux-x64 only): deploy with -c ffmpegLayerArn=<layer version ARN> or -c ffmpegLayerPath=<dir with bin/ffmpeg>`,
    );
  return lambda.Code.fromAsset(packaged.dir, {
    assetHashType: AssetHashType.CUSTOM,
    assetHash: `${FFMPEG_PACKAGE}@${packaged.version}`,
    bundling: {
      // Never used: local bundling always succeeds when the package is there (checked above).
      image: DockerImage.fromRegistry('public.ecr.aws/docker/library/busybox'),
      local: {
        tryBundle(outputDir: string) {
          mkdirSync(join(outputDir, 'bin'), { recursive: true });
          copyFileSync(join(packaged.dir, 'ffmpeg'), join(outputDir, 'bin', 'ffmpeg'));
          return true;
        },
      },
    },
  });
}
