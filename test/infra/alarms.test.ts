import { describe, expect, test } from '@jest/globals';
import { asArray, type Json, logicalIdOf, resourcesOf, synthesize } from './synth.js';

// Prepare: one synthesis with the defaults. The failure queues are read from the template (what rules
// and async invoke configs name), never from a hard-coded list, so a queue added anywhere is covered.
const { stateless, statelessTemplate: template } = synthesize();
const resources = template.toJSON().Resources as Record<string, Json>;
const outputs = template.toJSON().Outputs as Record<string, Json>;
const queues = resourcesOf(template, 'AWS::SQS::Queue');
const alarms = resourcesOf(template, 'AWS::CloudWatch::Alarm');
const topics = resourcesOf(template, 'AWS::SNS::Topic');
const topicId = logicalIdOf(stateless.alarmTopic);

/** The queue a `{ "Fn::GetAtt": [id, "Arn"] }` names, if it is a queue of the template. */
const queueOf = (arn: Json): string[] => {
  const id = arn?.['Fn::GetAtt']?.[0];
  return arn?.['Fn::GetAtt']?.[1] === 'Arn' && id in queues ? [id] : [];
};
/** Rule targets' dead-letter queues, and Lambda async invocations' on-failure destinations. */
const deliveryQueues = Object.values(resourcesOf(template, 'AWS::Events::Rule')).flatMap((rule) =>
  asArray<Json>(rule.Properties.Targets).flatMap((t) => queueOf(t.DeadLetterConfig?.Arn)),
);
const onFailureQueues = Object.values(resourcesOf(template, 'AWS::Lambda::EventInvokeConfig')).flatMap(
  (config) => queueOf(config.Properties.DestinationConfig?.OnFailure?.Destination),
);
const failureQueues = [...new Set([...deliveryQueues, ...onFailureQueues])].sort();

/** The alarms on a queue's ApproximateNumberOfMessagesVisible. */
const visibleAlarmsOf = (queueId: string): [string, Json][] =>
  Object.entries(alarms).filter(
    ([, a]) =>
      a.Properties.Namespace === 'AWS/SQS' &&
      a.Properties.MetricName === 'ApproximateNumberOfMessagesVisible' &&
      JSON.stringify(a.Properties.Dimensions) ===
        JSON.stringify([{ Name: 'QueueName', Value: { 'Fn::GetAtt': [queueId, 'QueueName'] } }]),
  );
/** An alarm description's literal text (its tokens as `<…>`). */
const textOf = (description: Json): string =>
  typeof description === 'string'
    ? description
    : (description['Fn::Join'][1] as Json[]).map((p) => (typeof p === 'string' ? p : '<…>')).join('');

describe('failure queue alarms', () => {
  test('the failure queues are found in the template: at least 13, each a distinct queue', () => {
    expect(failureQueues.length).toBeGreaterThanOrEqual(13);
    expect(deliveryQueues.length).toBeGreaterThan(0);
    expect(onFailureQueues.length).toBeGreaterThan(0);
    // No queue is both a target DLQ and an on-failure destination.
    expect(failureQueues).toHaveLength(deliveryQueues.length + onFailureQueues.length);
  });

  test('there is one alarm per failure queue, and no other alarm', () => {
    expect(Object.keys(alarms)).toHaveLength(failureQueues.length);
    const alarmed = failureQueues.filter((id) => visibleAlarmsOf(id).length > 0);
    expect(alarmed).toEqual(failureQueues);
  });

  describe.each(failureQueues)('%s', (queueId) => {
    test('has exactly one alarm: a message visible (maximum over 5 minutes >= 1) notifies the topic', () => {
      const found = visibleAlarmsOf(queueId);
      expect(found).toHaveLength(1);
      const [[, alarm]] = found as [[string, Json]];
      expect(alarm.Properties).toEqual(
        expect.objectContaining({
          Statistic: 'Maximum',
          Period: 300,
          Threshold: 1,
          ComparisonOperator: 'GreaterThanOrEqualToThreshold',
          EvaluationPeriods: 1,
          TreatMissingData: 'notBreaching',
          AlarmActions: [{ Ref: topicId }],
        }),
      );
    });

    test('its description says what the queue holds (as its output does), how to read it and what to do', () => {
      const [[, alarm]] = visibleAlarmsOf(queueId) as [[string, Json]];
      const description = alarm.Properties.AlarmDescription;
      const output = Object.values(outputs).find(
        (o) => JSON.stringify(o.Value) === JSON.stringify({ Ref: queueId }),
      );
      expect(output?.Description).toEqual(expect.any(String));
      const text = textOf(description);
      expect(text.startsWith(`${output.Description}. `)).toBe(true);
      expect(text).toMatch(/Each message is (the event|an invocation record)/);
      expect(text).toContain('aws sqs receive-message --queue-url');
      expect(JSON.stringify(description)).toContain(JSON.stringify({ Ref: queueId }));
      expect(text).toMatch(/replay it with aws lambda invoke|No replay needed|Replaying is pointless/);
      // CloudWatch's limit is 1024 characters; leave room for the URL and function name the tokens become.
      expect(text.length).toBeLessThan(1024 - 300);
    });
  });
});

describe('the alarm topic', () => {
  const topic = topics[topicId];

  test('is the stack’s one topic, and every alarm notifies it', () => {
    expect(Object.keys(topics)).toEqual([topicId]);
    for (const alarm of Object.values(alarms))
      expect(alarm.Properties.AlarmActions).toEqual([{ Ref: topicId }]);
  });

  test('is encrypted with its own rotating key that CloudWatch may use (not alias/aws/sns, which it may not)', () => {
    const keyId = topic.Properties.KmsMasterKeyId['Fn::GetAtt'][0];
    const key = resources[keyId];
    expect(key.Type).toBe('AWS::KMS::Key');
    expect(key.Properties.EnableKeyRotation).toBe(true);
    expect(asArray<Json>(key.Properties.KeyPolicy.Statement)).toContainEqual(
      expect.objectContaining({
        Effect: 'Allow',
        Principal: { Service: 'cloudwatch.amazonaws.com' },
        Action: ['kms:Decrypt', 'kms:GenerateDataKey*'],
      }),
    );
  });

  test('its policy denies publishing without TLS and lets only this account’s alarms publish', () => {
    const policies = Object.values(resourcesOf(template, 'AWS::SNS::TopicPolicy')).filter((p) =>
      asArray<Json>(p.Properties.Topics).some((t) => t.Ref === topicId),
    );
    expect(policies).toHaveLength(1);
    const statements = asArray<Json>(policies[0].Properties.PolicyDocument.Statement);
    expect(statements).toContainEqual(
      expect.objectContaining({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
    );
    const allows = statements.filter((s) => s.Effect === 'Allow');
    expect(allows).toEqual([
      expect.objectContaining({
        Action: 'sns:Publish',
        Principal: { Service: 'cloudwatch.amazonaws.com' },
        Resource: { Ref: topicId },
        Condition: expect.objectContaining({
          StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } },
        }),
      }),
    ]);
    expect(JSON.stringify(allows[0].Condition.ArnLike['aws:SourceArn'])).toContain(':alarm:*');
  });

  test('is output as AlarmTopicArn, for operators to subscribe to', () => {
    expect(outputs.AlarmTopicArn?.Value).toEqual({ Ref: topicId });
    expect(outputs.AlarmTopicArn.Description).toMatch(/subscribe/);
  });
});
