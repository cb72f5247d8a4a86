import { ArnFormat, Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cloudwatchActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { keepStackLevelIds } from '../logical-ids.js';
import { acknowledge } from '../nag.js';

/** What a failure queue holds and what to do about a message in it (its alarm's description). */
export interface FailureQueueSpec {
  /** What lands in it, worded as its URL output's description. */
  holds: string;
  /** What each message is. */
  message: string;
  /** What an operator does once the cause is known (replay, or why not). */
  action: string;
}

/** The message of an EventBridge target DLQ. */
export const deliveredEvent =
  'Each message is the event, with error attributes (ERROR_CODE, ERROR_MESSAGE, RULE_ARN, TARGET_ARN).';
/** The message of a Lambda on-failure destination. */
export const invocationRecord =
  'Each message is an invocation record: the event as requestPayload, the error as responsePayload.';
/** What keeps EventBridge from delivering to a function. */
export const fixDelivery = 'Fix the cause (a permission, throttling, a deleted function)';
/** Why a schedule's queues need no replay. */
export const supersededRun = 'No replay needed: the next run of the schedule supersedes a missed one.';
/** How to replay a message's event to a function (asynchronously, as EventBridge invokes it). */
export const replay = (fn: lambda.IFunction, payload: string): string =>
  `replay it with aws lambda invoke --function-name ${fn.functionName} --invocation-type Event ` +
  `--cli-binary-format raw-in-base64-out --payload '<${payload}>' /dev/null, and delete the message`;

/**
 * Operations: owns the topic operational alarms notify (output `AlarmTopicArn`; operators subscribe to
 * it) and its key, and makes the failure queues the other constructs need, each alarmed on that topic.
 * No props: what is configurable about alarms is who subscribes, which is the operators' choice.
 */
export class Operations extends Construct {
  /**
   * Where operational alarms notify, encrypted with its own key: CloudWatch cannot publish to a topic
   * under the AWS-managed `alias/aws/sns` key (its key policy cannot be changed to let CloudWatch use it),
   * so the key policy here lets it. TLS only; CloudWatch alarms of this account may publish.
   */
  readonly alarmTopic: sns.Topic;
  /** The topic's key. */
  readonly alarmTopicKey: kms.Key;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    const stack = Stack.of(this);
    this.alarmTopicKey = new kms.Key(this, 'AlarmTopicKey', {
      description: `${stack.stackName}: encrypts the operational alarm topic`,
      enableKeyRotation: true,
      removalPolicy: RemovalPolicy.DESTROY,
      pendingWindow: Duration.days(7),
    });
    this.alarmTopicKey.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'CloudWatchAlarmsPublish',
        principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'],
      }),
    );
    this.alarmTopic = new sns.Topic(this, 'AlarmTopic', {
      displayName: `${stack.stackName} alarms`,
      masterKey: this.alarmTopicKey,
      enforceSSL: true,
    });
    this.alarmTopic.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'CloudWatchAlarmsOfThisAccount',
        principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['sns:Publish'],
        resources: [this.alarmTopic.topicArn],
        conditions: {
          StringEquals: { 'aws:SourceAccount': stack.account },
          ArnLike: {
            'aws:SourceArn': stack.formatArn({
              service: 'cloudwatch',
              resource: 'alarm',
              resourceName: '*',
              arnFormat: ArnFormat.COLON_RESOURCE_NAME,
            }),
          },
        },
      }),
    );
    keepStackLevelIds(this.alarmTopicKey);
    keepStackLevelIds(this.alarmTopic);
  }

  /**
   * A queue of `scope` where failed events wait for an operator: encrypted (SSE-SQS), TLS only, kept 14
   * days, and alarmed: one message visible notifies the alarm topic, with what the queue holds, how to
   * read it and what to do. It keeps the logical id it had at the stack level.
   */
  failureQueue(scope: Construct, id: string, spec: FailureQueueSpec): sqs.Queue {
    const queue = new sqs.Queue(scope, id, {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
    });
    keepStackLevelIds(queue);
    acknowledge(
      queue,
      'AwsSolutions-SQS3',
      `This queue is itself a dead-letter queue (${spec.holds}); cdk-nag recognises only queues named in ` +
        "another queue's redrive policy or a function's DeadLetterConfig, not an EventBridge target DLQ or a " +
        'Lambda on-failure destination.',
    );
    const alarm = new cloudwatch.Alarm(scope, `${id}Alarm`, {
      metric: queue.metricApproximateNumberOfMessagesVisible({
        period: Duration.minutes(5),
        statistic: cloudwatch.Stats.MAXIMUM,
      }),
      threshold: 1,
      evaluationPeriods: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      alarmDescription:
        `${spec.holds}. ${spec.message} Inspect: aws sqs receive-message --queue-url ${queue.queueUrl} ` +
        `--attribute-names All --message-attribute-names All --max-number-of-messages 10. ${spec.action}`,
    });
    alarm.addAlarmAction(new cloudwatchActions.SnsAction(this.alarmTopic));
    return queue;
  }
}
